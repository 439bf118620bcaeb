#!/bin/sh
# Issue 4 acceptance: llama.cpp's quantized GGUF files run by colibri as llama.cpp runs them.
# On tests/fixtures/mixtral (ORACLE-README.md), for each of model-{q8_0,q4_0,q4_k_m,q6_k}.gguf,
# straight from the .gguf AND through `colibri convert X.gguf -o X.colibri` (every tensor,
# and every expert slice of the stacked *_exps tensors, must keep its bytes exactly):
#   prompt: the 40 tokens, --dump-logits; against llama.cpp's logits-<v>.bin
#           argmax(colibri) == argmax(llama.cpp) at >= 90 % of the 40 positions, and
#           rms(colibri - logits-f32) <= 1.1 x rms(llama.cpp <v> - logits-f32)
#   decode: tokens + greedy-<v> (64 ids) teacher-forced one token at a time (--batch 1, the
#           single-token KV-cache path); rows 40..63 against decode-logits-<v>.bin:
#           argmax agreement >= 90 %; rms and the greedy ids are reported.
# And the f32 GGUF: max |diff| <= 1e-4 x max |logit| per row vs logits-f32.bin, all argmax,
# greedy (-n 24) == greedy-f32.txt, decode rows vs decode-logits-f32.bin within the same bound.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
TOL=${FIXTURE_TOL:-1e-4}
MIN_ARGMAX=${Q_MIN_ARGMAX:-0.9}
RMS_RATIO=${Q_RMS_RATIO:-1.1}
THREADS=${THREADS:-2}
d="$FX/mixtral"
toks=$(csv "$(cat "$d/tokens.txt")")
TABLE="$WORK/table.txt"
: >"$TABLE"

# figures VARIANT SRC PROMPT_LOGITS PROMPT_IDS DECODE_LOGITS: one table row, exit 1 on a bound
figures() {
    "$PYTHON" - "$d" "$@" "$MIN_ARGMAX" "$RMS_RATIO" >>"$TABLE" <<'EOF'
import sys
import numpy as np
fx, v, src, lg, ids, dec, min_am, ratio = sys.argv[1:9]
min_am, ratio = float(min_am), float(ratio)
V = 512
load = lambda p: np.fromfile(p, dtype="<f4").reshape(-1, V).astype(np.float64)
f32 = load(f"{fx}/logits-f32.bin")
ref = load(f"{fx}/logits-{v}.bin")
got = load(lg)
dref = load(f"{fx}/decode-logits-{v}.bin")
dgot = load(dec)[40:64]
rms = lambda a, b: float(np.sqrt(np.mean((a - b) ** 2)))
am = lambda a, b: float(np.mean(np.argmax(a, 1) == np.argmax(b, 1)))
a_p, a_d = am(got, ref), am(dgot, dref)
r_c, r_l = rms(got, f32), rms(ref, f32)
g_ok = open(ids).read().split() == open(f"{fx}/greedy-{v}.txt").read().split()
ok = a_p >= min_am and r_c <= ratio * r_l and a_d >= min_am
print(f"{v:7s} {src:8s} {a_p * 40:4.0f}/40 {r_c:9.4f} {r_l:9.4f} {r_c / r_l:6.3f} {rms(got, ref):9.2e}"
      f" {a_d * 24:4.0f}/24  {rms(dgot, dref):9.2e} {'yes' if g_ok else 'no':>6s}  {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
EOF
}

for v in q8_0 q4_0 q4_k_m q6_k f32; do
    gguf="$d/model-$v.gguf"
    echo "== $v"
    models=$gguf
    if colibri_convert "$gguf" "$WORK/$v.colibri"; then
        check "$PYTHON" "$REF/gguf_np.py" colibri-bytes "$gguf" "$WORK/$v.colibri"
        models="$models $WORK/$v.colibri"
    fi
    for m in $models; do
        case $m in *.gguf) src=gguf ;; *) src=colibri ;; esac
        colibri_run "$WORK/$v.$src.ids" $F32KV -m "$m" --tokens "$toks" -n 24 --threads "$THREADS" \
            --dump-logits "$WORK/$v.$src.logits" || continue
        full=$(csv "$(cat "$d/tokens.txt") $(cat "$d/greedy-$v.txt")")
        colibri_run "$WORK/$v.$src.full.ids" $F32KV -m "$m" --tokens "$full" -n 1 --batch 1 --threads "$THREADS" \
            --dump-logits "$WORK/$v.$src.full.logits" || continue
        if [ "$v" = f32 ]; then
            check "$PYTHON" "$REF/compare.py" logits "$WORK/$v.$src.logits" "$d/logits-f32.bin" --vocab 512 \
                --max-rel-row "$TOL" --min-argmax 1 --label "f32 ($src) prompt vs logits-f32"
            check "$PYTHON" "$REF/compare.py" greedy "$WORK/$v.$src.ids" "$d/greedy-f32.txt" --label "f32 ($src) greedy"
            check "$PYTHON" "$REF/compare.py" logits "$WORK/$v.$src.full.logits" "$d/decode-logits-f32.bin" \
                --vocab 512 --got-rows 40:64 --max-rel-row "$TOL" --min-argmax 1 \
                --label "f32 ($src) decode rows 40..63 vs decode-logits-f32"
        else
            figures "$v" "$src" "$WORK/$v.$src.logits" "$WORK/$v.$src.ids" "$WORK/$v.$src.full.logits" \
                || fail "$v ($src): a bound is exceeded (see the table)"
        fi
    done
done

echo
echo "mixtral fixture, 40 prompt positions / 24 decode steps; c = colibri, l.c. = llama.cpp <v>, f32 = logits-f32.bin"
echo "(bounds: argmax >= $MIN_ARGMAX on prompt and decode rows, rms(c-f32) <= $RMS_RATIO x rms(l-f32))"
echo "variant source  argmax  rms(c-f32) rms(l-f32)  ratio   rms(c-l)  decode   rms(dec) greedy"
echo "                vs l.c.                                         vs l.c.    vs l.c.  =l.c."
cat "$TABLE"
finish gguf_quant
