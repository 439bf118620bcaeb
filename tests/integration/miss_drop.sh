#!/bin/sh
# Residency-aware dynamic k (--moe-miss-drop, docs/MEMORY.md) on the bundled model, through
# `colibri perplexity`: under a pool of 2 experts per layer, W = 0 keeps every logit (KL from
# the unbounded run exactly 0, the same perplexity, nothing dropped); W = 0.5 drops absent
# second experts (batched and token by token), which moves the distributions (KL > 0, finite)
# by a bounded amount; the references --kl-memory and --kl-divergence compare with are the
# exact runs whatever memory options are given; bad values are one-line refusals.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
M="$ROOT/models/colibri-tiny.colibri"
HELD="$ROOT/models/colibri-tiny.heldout.txt"
[ -f "$M" ] || { echo "FAIL: $M is missing"; exit 1; }

set -- $("$COLIBRI" inspect "$M" |
    sed -n 's/^experts: .* \([0-9]*\) per token, \([0-9]*\) MoE layers, \([0-9]*\) bytes per expert.*/\1 \2 \3/p')
k=${1:-0}; layers=${2:-0}; ebytes=${3:-0}
[ "$layers" -gt 0 ] || { echo "FAIL: colibri inspect shows no experts"; exit 1; }
# a slot is the expert plus at most two pages of alignment per tensor (as invariance.sh)
two=$(( 2 * layers * (ebytes + 6 * 4096) ))

ppl() { # NAME ARGS...: perplexity over 4 chunks into $WORK/NAME
    _n=$1; shift
    "$COLIBRI" perplexity -m "$M" -f "$HELD" --ctx 128 --chunks 4 -t 2 "$@" >"$WORK/$_n" 2>"$WORK/$_n.err" ||
        { fail "perplexity $*: $(tail -1 "$WORK/$_n.err")"; return 1; }
    echo "== $_n: $*"; cat "$WORK/$_n"
}
ppl plain
ppl exact --kl-divergence
ppl w0 --expert-pool "$two" --moe-miss-drop 0 --kl-memory
ppl w5 --expert-pool "$two" --moe-miss-drop 0.5 --kl-memory
ppl w5b1 --expert-pool "$two" --moe-miss-drop 0.5 --kl-memory --batch 1
ppl w5exact --expert-pool "$two" --moe-miss-drop 0.5 --kl-divergence

"$PYTHON" - "$REF" "$WORK" "$((2 * layers))" "$((4 * 128 * k * layers))" "$k" <<'PY' || fail "the figures break a property (above)"
import math, os, sys
sys.path.insert(0, sys.argv[1])
from ppl_figures import parse as parse_file
work, slots, n_sel, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def parse(name):
    return parse_file(os.path.join(work, name))
plain, exact, w0, w5, w5b1, w5x = (parse(n) for n in ("plain", "exact", "w0", "w5", "w5b1", "w5exact"))
bad = []
def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond: bad.append(msg)
check("slots" not in plain, "no pool: no expert figures")
for n, r in (("w0", w0), ("w5", w5), ("w5b1", w5b1), ("w5exact", w5x)):
    check(r.get("slots") == slots, "%s: a pool of %d slots (%s)" % (n, slots, r.get("slots")))
    check(r.get("bytes", 0) > 0 and r.get("selections") == n_sel, "%s: bytes read, %d selections" % (n, n_sel))
# W = 0: a bounded pool never changes the logits
check(w0["ref_kind"] == "unbounded", "--kl-memory compares with the unbounded run")
check(w0["kl_text"] == "0 0", "W = 0: KL mean and max exactly 0 (%s)" % w0["kl_text"])
check(w0["ppl"] == w0["ref"] == plain["ppl"], "W = 0: perplexity %s = reference %s = plain %s" % (w0["ppl"], w0["ref"], plain["ppl"]))
check(w0["agree"] == 100.0 and w0["dropped"] == 0, "W = 0: argmax agrees everywhere, nothing dropped")
# W = 0.5: absent second experts dropped; the distributions move, boundedly
for n, r in (("w5", w5), ("w5b1", w5b1)):
    check(r["dropped"] > 0, "%s: %d selections dropped" % (n, r["dropped"]))
    check(r["dropped"] <= r["selections"] * (k - 1) // k, "%s: never a token's first expert dropped" % n)
    check(0 < r["kl"] < 1 and math.isfinite(r["kl_max"]) and r["kl_max"] >= r["kl"], "%s: KL mean %g in (0, 1), max %g finite" % (n, r["kl"], r["kl_max"]))
    check(math.isfinite(r["ppl"]) and abs(r["ppl"] / r["ref"] - 1) < 0.25, "%s: perplexity %g within 25 %% of %g" % (n, r["ppl"], r["ref"]))
    check(50 < r["agree"] < 100, "%s: argmax agreement %g %% below 100, above 50" % (n, r["agree"]))
    check(r["ref"] == plain["ppl"], "%s: the reference is the exact run (%s = %s)" % (n, r["ref"], plain["ppl"]))
# --kl-divergence: its reference (f32 caches, plain path) is exact whatever the memory options
check(exact["ref_kind"] == "f32" and w5x["ref_kind"] == "f32", "--kl-divergence compares with f32 caches")
check(w5x["ref"] == exact["ref"], "the f32 reference ignores the pool and W (%s = %s)" % (w5x["ref"], exact["ref"]))
check(w5x["kl"] > exact["kl"], "dropping costs more than the f16 cache alone (KL %g > %g)" % (w5x["kl"], exact["kl"]))
sys.exit(1 if bad else 0)
PY

# bad values: one line, no crash
expect_clean_error "0..1" perplexity -m "$M" -f "$HELD" --moe-miss-drop 1.5
expect_clean_error "0..1" perplexity -m "$M" -f "$HELD" --moe-miss-drop -0.1
expect_clean_error "0..1" perplexity -m "$M" -f "$HELD" --moe-miss-drop half
expect_clean_error "not a size" perplexity -m "$M" -f "$HELD" --mem-budget -1
expect_clean_error "not a size" perplexity -m "$M" -f "$HELD" --expert-pool -4096
expect_clean_error "fewer than 2 experts" perplexity -m "$M" -f "$HELD" --expert-pool $((ebytes + 1))
expect_clean_error "give one" perplexity -m "$M" -f "$HELD" --kl-divergence --kl-memory
expect_clean_error "shorter than a chunk" perplexity -m "$M" -f "$HELD" --ctx 128 --max-seq-len 64
expect_clean_error "unknown option" perplexity -m "$M" -f "$HELD" --moe-miss-dropp 0.5
finish miss_drop
