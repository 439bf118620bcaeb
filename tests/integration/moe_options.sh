#!/bin/sh
# Heterogeneous experts (per-expert dtypes chosen at conversion), dynamic k (top-p routing),
# router temperature and run-time top-k through the CLI, on the mixtral fixture.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
HF="$FX/mixtral/hf"
toks=$(csv "$(cat "$FX/mixtral/tokens.txt")")
run_logits() { # MODEL OUT [args]
    m=$1; o=$2; shift 2
    # shellcheck disable=SC2086 # F32KV: two options
    "$COLIBRI" run -m "$m" --tokens "$toks" -n 1 --dump-logits "$o" $F32KV "$@" >/dev/null 2>"$WORK/err" \
        || { fail "run $m $*: $(cat "$WORK/err")"; return 1; }
}
expert_dtypes() { # MODEL -> "layer:expert:dtype" lines from the .colibri index
    "$PYTHON" - "$1" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
mo, = struct.unpack('<Q', b[16:24]); n, = struct.unpack('<Q', b[mo:mo + 8])
for t in json.loads(b[mo + 8:mo + 8 + n])['tensors']:
    if t['expert'] >= 0: print('%d:%d:%s' % (t['layer'], t['expert'], t['dtype']))
PY
}
# 1. a per-expert map: experts 0-3 q8_0, 4-7 q4_0 in every layer; dense stays q8_0
colibri_convert "$HF" "$WORK/het.colibri" --dtype q8_0 --expert-dtype-map "0-3:q8_0,4-7:q4_0" || exit 1
bad=$(expert_dtypes "$WORK/het.colibri" | awk -F: '($2 < 4 && $3 != "q8_0") || ($2 >= 4 && $3 != "q4_0")' | wc -l)
[ "$bad" -eq 0 ] || fail "expert dtypes do not follow the map ($bad tensors)"
# a JSON map with a layer override: layer 1 all q4_0, layer 0 as above
colibri_convert "$HF" "$WORK/hetj.colibri" --dtype q8_0 \
    --expert-dtype-map '{"*": "0-3:q8_0,4-7:q4_0", "1": "0-7:q4_0"}' || exit 1
bad=$(expert_dtypes "$WORK/hetj.colibri" | awk -F: '($1 == 1 && $3 != "q4_0") || ($1 == 0 && $2 < 4 && $3 != "q8_0")' | wc -l)
[ "$bad" -eq 0 ] || fail "JSON expert map not applied ($bad tensors)"
# the map "every expert q4_0" is the same file content as --expert-dtype q4_0: same logits
colibri_convert "$HF" "$WORK/all4.colibri" --dtype q8_0 --expert-dtype-map "0-7:q4_0" || exit 1
colibri_convert "$HF" "$WORK/e4.colibri" --dtype q8_0 --expert-dtype q4_0 || exit 1
colibri_convert "$HF" "$WORK/e8.colibri" --dtype q8_0 || exit 1
run_logits "$WORK/all4.colibri" "$WORK/all4.bin" && run_logits "$WORK/e4.colibri" "$WORK/e4.bin" &&
    { cmp -s "$WORK/all4.bin" "$WORK/e4.bin" || fail "map 0-7:q4_0 differs from --expert-dtype q4_0"; }
# mixed experts share the dispatch; accuracy lies between the all-q8_0 and all-q4_0 files
run_logits "$WORK/het.colibri" "$WORK/het.bin" && run_logits "$WORK/e8.colibri" "$WORK/e8.bin" &&
"$PYTHON" - "$WORK/het.bin" "$WORK/e8.bin" "$WORK/e4.bin" "$FX/mixtral/logits-f32.bin" <<'PY' || fail "heterogeneous accuracy"
import numpy as np, sys
h, a8, a4, f = (np.fromfile(p, dtype='<f4').reshape(40, 512) for p in sys.argv[1:])
r = lambda x: float(np.sqrt(((x - f) ** 2).mean()))
print('rms vs f32: q8_0 experts %.4f, mixed %.4f, q4_0 experts %.4f' % (r(a8), r(h), r(a4)))
assert r(a8) <= r(h) * 1.05 and r(h) <= r(a4) * 1.05, 'mixed is not between the uniform files'
assert (h.argmax(1) == f.argmax(1)).mean() >= 0.85
PY
bad=$(printf '0-3:q8_0,9:q4_0' ); if "$COLIBRI" convert "$HF" -o "$WORK/x.colibri" --expert-dtype-map "$bad" 2>"$WORK/err"; then
    fail "an out-of-range expert was accepted"; else grep -q "9:q4_0" "$WORK/err" || fail "bad map not named: $(cat "$WORK/err")"; fi
if "$COLIBRI" convert "$HF" -o "$WORK/x.colibri" --expert-dtype-map "0-7:q9_9" 2>"$WORK/err"; then fail "dtype q9_9 accepted"; fi

# 2. dynamic k: top-p 1.0 with k_max 8 uses every expert (= top-k 8); a small p with
#    k_min 2 / k_max 2 equals top-2 (the model's own)
M="$FX/mixtral/model-f32.gguf"
run_logits "$M" "$WORK/k2.bin" && run_logits "$M" "$WORK/p_k2.bin" --moe-top-p 0.01 --moe-k-min 2 --moe-k-max 2 &&
    { cmp -s "$WORK/k2.bin" "$WORK/p_k2.bin" || fail "top-p bounded to 2 differs from top-2"; }
run_logits "$M" "$WORK/k8.bin" --moe-top-k 8 && run_logits "$M" "$WORK/p1.bin" --moe-top-p 1.0 &&
    { cmp -s "$WORK/k8.bin" "$WORK/p1.bin" || fail "top-p 1.0 differs from top-8"; }
run_logits "$M" "$WORK/p5.bin" --moe-top-p 0.5 && { cmp -s "$WORK/p5.bin" "$WORK/k2.bin" && cmp -s "$WORK/p5.bin" "$WORK/k8.bin" \
    && fail "top-p 0.5 equals both"; }
# 3. router temperature changes the weights (temperature 1 is the identity)
run_logits "$M" "$WORK/t1.bin" --router-temperature 1 && { cmp -s "$WORK/t1.bin" "$WORK/k2.bin" || fail "temperature 1 changed logits"; }
run_logits "$M" "$WORK/t3.bin" --router-temperature 3 && { cmp -s "$WORK/t3.bin" "$WORK/k2.bin" && fail "temperature 3 had no effect"; }
# 4. run-time top-k from a config file, and its bound
printf '{"moe_top_k": 8}' >"$WORK/cfg.json"
run_logits "$M" "$WORK/c8.bin" --config "$WORK/cfg.json" && { cmp -s "$WORK/c8.bin" "$WORK/k8.bin" || fail "moe_top_k in the config differs from --moe-top-k"; }
finish moe_options
