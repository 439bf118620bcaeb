#!/bin/sh
# Placement never changes the result (docs/MEMORY.md): for the Mixtral fixtures (the HF
# directory converted to .colibri, the q4_0 GGUF read directly) and a generated larger
# Mixtral-shaped q4_0 GGUF (tools/gen_mixtral_gguf.py --small, ~30 MB, made here in $WORK),
# `colibri run --dump-logits` gives byte-identical logits and the same greedy ids across:
# no budget, an expert pool holding only 2 experts per layer, every cache policy, prefetch
# on/off, every read path (O_DIRECT, the default; pread + DONTNEED; buffered), 1 and 2 threads, batched and token-by-token prompts; plus a
# --mem-budget run and guard mode (COLIBRI_GUARD=1) over the whole forward pass.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri

small="$WORK/mixtral-small-q4_0.gguf"
"$PYTHON" "$ROOT/tools/gen_mixtral_gguf.py" --small "$small" || fail "gen_mixtral_gguf.py --small failed"
hf_model="$WORK/mixtral-f32.colibri"
colibri_convert "$FX/mixtral/hf" "$hf_model" --dtype f32

# expert bytes and MoE layer count from `colibri inspect`
expert_info() {
    "$COLIBRI" inspect "$1" | sed -n 's/^experts: .* \([0-9]*\) MoE layers, \([0-9]*\) bytes per expert.*/\1 \2/p'
}

toks=$(csv "$(cat "$FX/mixtral/tokens.txt")")
for model in "$FX/mixtral/model-q4_0.gguf" "$hf_model" "$small"; do
    [ -f "$model" ] || { fail "missing $model"; continue; }
    set -- $(expert_info "$model")
    layers=${1:-0}; ebytes=${2:-0}
    if [ "$layers" -eq 0 ]; then fail "$model: colibri inspect shows no experts"; continue; fi
    # a slot is the expert plus at most two pages of alignment per tensor
    two=$(( 2 * layers * (ebytes + 6 * 4096) ))
    name=$(basename "$model")
    echo "== $name: $layers MoE layers, $ebytes bytes per expert, pool of 2 per layer = $two bytes"
    colibri_run "$WORK/ref.ids" -m "$model" --tokens "$toks" -n 8 --threads 1 --dump-logits "$WORK/ref.logits" || continue
    i=0
    while read -r opts; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        if ! COLIBRI_GUARD=${GUARD_ALL:-0} colibri_run "$WORK/got.ids" -m "$model" --tokens "$toks" -n 8 \
                --dump-logits "$WORK/got.logits" $opts; then
            continue
        fi
        cmp -s "$WORK/ref.logits" "$WORK/got.logits" || fail "$name [$opts]: logits differ from the unbounded run"
        cmp -s "$WORK/ref.ids" "$WORK/got.ids" || fail "$name [$opts]: greedy ids differ"
        case "$opts" in
        *"--expert-pool $two"*)
            grep -q "expert pool $((2 * layers)) slots" "$WORK/run.err" ||
                fail "$name [$opts]: pool is not $((2 * layers)) slots: $(grep 'expert pool' "$WORK/run.err")" ;;
        esac
        echo "ok $name [$opts]"
    done <<EOF
--threads 1 --expert-pool $two --cache-policy lru
--threads 1 --expert-pool $two --cache-policy lfu
--threads 1 --expert-pool $two --cache-policy pinned
--threads 1 --expert-pool $two --prefetch off
--threads 1 --expert-pool $two --direct-io
--threads 2 --expert-pool $two --direct-io --prefetch off --cache-policy lfu
--threads 2 --expert-pool $two --cache-policy pinned --io-threads 1
--threads 2 --expert-pool $two --batch 1
--threads 2 --expert-pool $two --batch 7 --direct-io
--threads 1 --expert-pool $two --buffered-io
--threads 2 --expert-pool $two --direct-io dontneed --batch 7
--threads 2 --mem-budget 1GiB --direct-io off
--threads 2
--threads 2 --prefetch on
--threads 2 --mem-budget 1GiB
EOF
    # guard mode over the whole forward pass: no access outside acquire/release
    if COLIBRI_GUARD=1 colibri_run "$WORK/guard.ids" -m "$model" --tokens "$toks" -n 8 --threads 2 \
            --expert-pool "$two" --dump-logits "$WORK/guard.logits"; then
        cmp -s "$WORK/ref.logits" "$WORK/guard.logits" || fail "$name: guard-mode logits differ"
        echo "ok $name [guard mode]"
    fi
done

finish invariance
