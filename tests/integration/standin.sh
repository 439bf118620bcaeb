#!/bin/sh
# Low-bit stand-ins (colibri convert --standin-dtype, --moe-standin; docs/MEMORY.md) on the
# bundled model, through the CLI: the file with stand-ins gives the plain file's perplexity
# bit for bit unless asked (also through a pool, and encrypted: each stand-in is a chunk of its
# own); asked, token by token under a pool of 2 experts per layer, absent low-weight experts
# are computed with their stand-ins (counted, never a token's first), which moves the
# distributions by a bounded amount (perplexity within 2 %; which experts are absent depends
# on the reads' timing, as with --moe-miss-drop); a re-conversion keeps the stand-ins; bad values and
# impossible stand-in types are one-line refusals.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
M="$ROOT/models/colibri-tiny.colibri"
HELD="$ROOT/models/colibri-tiny.heldout.txt"
[ -f "$M" ] || { echo "FAIL: $M is missing"; exit 1; }
ST="$WORK/standin.colibri"
KEY="$WORK/key"

set -- $("$COLIBRI" inspect "$M" |
    sed -n 's/^experts: .* \([0-9]*\) per token, \([0-9]*\) MoE layers, \([0-9]*\) bytes per expert.*/\1 \2 \3/p')
k=${1:-0}; layers=${2:-0}; ebytes=${3:-0}
[ "$layers" -gt 0 ] || { echo "FAIL: colibri inspect shows no experts"; exit 1; }
two=$(( 2 * layers * (ebytes + 6 * 4096) )) # as miss_drop.sh: a slot is the expert + alignment

"$COLIBRI" convert "$M" -o "$ST" --standin-dtype q4_0 --threads 2 >"$WORK/conv.out" 2>&1 ||
    { fail "convert --standin-dtype q4_0: $(tail -1 "$WORK/conv.out")"; finish standin; exit 1; }
"$COLIBRI" keygen "$KEY" 2>/dev/null || fail "keygen"
"$COLIBRI" convert "$ST" -o "$WORK/enc.colibri" --encrypt --key-file "$KEY" >"$WORK/enc.out" 2>&1 ||
    fail "convert --encrypt of the stand-in file: $(tail -1 "$WORK/enc.out")"
"$COLIBRI" convert "$ST" -o "$WORK/again.colibri" --compress zstd >"$WORK/again.out" 2>&1 ||
    fail "re-convert of the stand-in file: $(tail -1 "$WORK/again.out")"

ppl() { # NAME MODEL ARGS...: perplexity over 4 chunks into $WORK/NAME
    _n=$1; _m=$2; shift 2
    "$COLIBRI" --key-file "$KEY" perplexity -m "$_m" -f "$HELD" --ctx 128 --chunks 4 -t 2 "$@" >"$WORK/$_n" \
        2>"$WORK/$_n.err" || { fail "perplexity $_m $*: $(tail -1 "$WORK/$_n.err")"; return 1; }
    echo "== $_n: $*"; cat "$WORK/$_n"
}
ppl plain "$M"
ppl st "$ST"
ppl s0 "$ST" --expert-pool "$two" --batch 1 --moe-standin 0 --kl-memory
ppl s5 "$ST" --expert-pool "$two" --batch 1 --moe-standin 0.5 --kl-memory
ppl s10 "$ST" --expert-pool "$two" --batch 1 --moe-standin 1 --kl-memory
ppl nost "$M" --expert-pool "$two" --batch 1 --moe-standin 1 --kl-memory
ppl enc0 "$WORK/enc.colibri" --expert-pool "$two" --batch 1
ppl enc5 "$WORK/enc.colibri" --expert-pool "$two" --batch 1 --moe-standin 0.5 --kl-memory
ppl again5 "$WORK/again.colibri" --expert-pool "$two" --batch 1 --moe-standin 0.5 --kl-memory

"$PYTHON" - "$REF" "$WORK" "$((2 * layers))" "$((4 * 128 * k * layers))" "$k" <<'PY' || fail "the figures break a property (above)"
import math, os, sys
sys.path.insert(0, sys.argv[1])
from ppl_figures import parse as parse_file
work, slots, n_sel, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def parse(name):
    return parse_file(os.path.join(work, name))
R = {n: parse(n) for n in ("plain", "st", "s0", "s5", "s10", "nost", "enc0", "enc5", "again5")}
bad = []
def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond: bad.append(msg)
plain = R["plain"]["ppl"]
for n in ("st", "s0", "enc0", "nost"):
    check(R[n]["ppl"] == plain, "%s: perplexity %s = the plain file's %s" % (n, R[n]["ppl"], plain))
for n in ("s0", "nost"):
    check(R[n]["kl_text"] == "0 0" and R[n]["standins"] == 0, "%s: KL exactly 0, no stand-in (%s, %d)" % (n, R[n]["kl_text"], R[n]["standins"]))
for n in ("s0", "s5", "s10", "nost", "enc0", "enc5", "again5"):
    r = R[n]
    # (an encoded file's slots also hold its chunk alignment, and its decoders share the pool's bytes)
    want_slots = slots if n in ("s0", "s5", "s10", "nost") else r.get("slots")
    check(r.get("slots") == want_slots and r.get("selections") == n_sel and r.get("dropped") == 0,
          "%s: a pool of %d slots, %d selections, none dropped" % (n, want_slots or 0, n_sel))
for n in ("s5", "s10", "enc5", "again5"):
    r = R[n]
    check(r["standins"] > 0, "%s: %d selections computed with a stand-in" % (n, r["standins"]))
    check(r["standins"] <= r["selections"] * (k - 1) // k, "%s: never a token's top expert" % n)
    check(0 < r["kl"] < 0.1 and math.isfinite(r["kl_max"]) and r["kl_max"] >= r["kl"],
          "%s: KL mean %g in (0, 0.1), max %g finite" % (n, r["kl"], r["kl_max"]))
    check(r["ref"] == plain and abs(r["ppl"] / plain - 1) < 0.02,
          "%s: perplexity %g within 2 %% of the exact %g" % (n, r["ppl"], plain))
# (which experts are absent when their layer runs depends on the I/O threads' timing, so the
# stand-in runs are compared with the exact run, not with each other)
sys.exit(1 if bad else 0)
PY

# bad values and impossible stand-ins: one line, no crash, nothing written
expect_clean_error "0..1" perplexity -m "$ST" -f "$HELD" --moe-standin 1.5
expect_clean_error "0..1" perplexity -m "$ST" -f "$HELD" --moe-standin some
expect_clean_error "do not fit q2_k blocks" convert "$M" -o "$WORK/bad.colibri" --standin-dtype q2_k
[ -e "$WORK/bad.colibri" ] && fail "a refused conversion left $WORK/bad.colibri"
expect_clean_error "is a mix" convert "$M" -o "$WORK/bad.colibri" --standin-dtype Q4_K_M
expect_clean_error "unknown stand-in dtype" convert "$M" -o "$WORK/bad.colibri" --standin-dtype q9_9
expect_clean_error "already has stand-ins" convert "$ST" -o "$WORK/bad.colibri" --standin-dtype q4_0
finish standin
