#!/bin/sh
# memory_budget.sh — Colibri's expert memory hierarchy on a model larger than its budget
# (docs/MEMORY.md). Not run in CI.
#
#   sh bench/memory_budget.sh [-m MODEL] [-l LLAMA_BENCH] [-B OLD_COLIBRI] [-c CAP] [-b BUDGET] [-r RATE] [-o OUTDIR] [--sweep]
#
#   MODEL        Mixtral-shaped q4_0 GGUF (default /tmp/mixtral-4l-q4_0.gguf; made with
#                /usr/bin/python3 tools/gen_mixtral_gguf.py MODEL if missing)
#   LLAMA_BENCH  path of llama.cpp's (or ik_llama.cpp's) llama-bench (optional; skipped when absent)
#   OLD_COLIBRI  an older colibri binary, run with the same options (its own defaults)
#   CAP          cgroup memory cap, page cache included (default 1536M)
#   BUDGET       colibri --mem-budget inside the cap (default 1400M)
#   RATE         read bandwidth of the model's disk in bytes/s (bench/throttle.sh: a
#                device's storage on a VM whose disk reads from the host's cache); every
#                engine and the disk measurement run under it (default: no throttle)
#   --sweep      also decode tok/s against the budget, 10%..100% of the model (no cap), for
#                docs/memory_budget.svg (bench/plot_budget.py)
#
# Environment: NDEC (decoded tokens, 32), ROUNDS (rounds of cold runs, every engine once
# each, 3), THREADS (2), COLIBRI_ARGS (options added to the colibri runs), LLAMA_RTR=1 (also
# llama-bench -rtr 1), BUFFERED=0 (skip the --buffered-io run). The engines take turns, pair by pair, each run cold; this VM's disk moves
# between 400 and 1300 MB/s from one minute to the next, so the disk is also measured
# again after the runs.
#
# Needs root for the cgroup. This machine has cgroup v1 (/sys/fs/cgroup/memory); with only
# cgroup v2 the script uses memory.max / memory.peak of a child of the root instead.
# The page cache cannot be dropped here (/proc/sys/vm/drop_caches is read-only in this
# container): "cold" evicts the model file's pages with posix_fadvise(DONTNEED) instead.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=/tmp/mixtral-4l-q4_0.gguf
LLAMA=""
BEFORE=""
CAP=1536M
BUDGET=1400M
RATE=""
OUT=${TMPDIR:-/tmp}/colibri-membench
SWEEP=0
COLIBRI=${COLIBRI:-$ROOT/build/x86_64/colibri}
PY=/usr/bin/python3
THREADS=${THREADS:-2}
NDEC=${NDEC:-32}
while [ $# -gt 0 ]; do
    case "$1" in
    -m) MODEL=$2; shift 2 ;;
    -l) LLAMA=$2; shift 2 ;;
    -B) BEFORE=$2; shift 2 ;;
    -c) CAP=$2; shift 2 ;;
    -b) BUDGET=$2; shift 2 ;;
    -r) RATE=$2; shift 2 ;;
    -o) OUT=$2; shift 2 ;;
    --sweep) SWEEP=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
[ -f "$MODEL" ] || "$PY" "$ROOT/tools/gen_mixtral_gguf.py" "$MODEL" || exit 1
# private copy: other builds may relink the binary while we run
cp "$COLIBRI" "$OUT/colibri" || exit 1
COLIBRI=$OUT/colibri

to_bytes() { "$PY" -c "import sys;s=sys.argv[1];m={'K':1<<10,'M':1<<20,'G':1<<30};print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))" "$1"; }
CAP_B=$(to_bytes "$CAP")

# ---- cgroup ----
CG=""
if [ -d /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/colibri-bench-$$
    mkdir -p "$CG" && echo "$CAP_B" > "$CG/memory.limit_in_bytes" || CG=""
    LIMIT_FILE=memory.limit_in_bytes; PEAK_FILE=memory.max_usage_in_bytes
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CG=/sys/fs/cgroup/colibri-bench-$$
    mkdir -p "$CG" && echo "$CAP_B" > "$CG/memory.max" || CG=""
    LIMIT_FILE=memory.max; PEAK_FILE=memory.peak
fi
[ -n "$CG" ] || echo "warning: no memory cgroup available: runs are NOT capped" >&2
# shellcheck source=bench/throttle.sh
. "$ROOT/bench/throttle.sh"
if [ -n "$RATE" ]; then
    throttle_setup "$(to_bytes "$RATE")" "colibri-bench-$$" "$MODEL" || exit 1
    echo "reads of $MODEL's disk throttled to $(to_bytes "$RATE") bytes/s"
fi

capped() { # capped CMD...: runs CMD inside the cgroup, records its peak in $OUT/peak
    if [ -n "$CG" ]; then
        [ "$PEAK_FILE" = memory.max_usage_in_bytes ] && echo 0 > "$CG/$PEAK_FILE"
        throttled sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$CG" "$@"
        _st=$?
        cat "$CG/$PEAK_FILE" > "$OUT/peak"
        return $_st
    fi
    throttled "$@"
}

evict_file() { "$PY" -c "import os,sys;fd=os.open(sys.argv[1],os.O_RDONLY);os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$1"; }
cached_mib() { "$PY" "$ROOT/bench/pagecache.py" "$1"; }

MODEL_B=$(stat -c %s "$MODEL")
echo "model: $MODEL ($(echo "$MODEL_B / 1000000000" | bc -l | cut -c1-5) GB), cap $CAP ($CAP_B bytes), budget $BUDGET"
echo "machine: $(nproc) CPUs, $(free -m | awk '/Mem:/{print $2}') MiB RAM, threads $THREADS"

# ---- disk bandwidth: 1 and 4 readers, O_DIRECT, 4 MiB reads ----
bw() { # bw N -> MB/s over N parallel O_DIRECT readers, each of its own 1/N of the first
       # 2 GiB of the model (a reader past the end of the file would count bytes never read)
    _n=$1; _c=$((512 / _n)); _t0=$(date +%s.%N)
    for i in $(seq 0 $((_n - 1))); do
        throttled dd if="$MODEL" of=/dev/null bs=4M count=$_c skip=$((i * _c)) iflag=direct 2>/dev/null &
    done
    wait
    _t1=$(date +%s.%N)
    echo "$_n * $_c * 4.194304 / ($_t1 - $_t0)" | bc -l | cut -d. -f1
}
BW1=$(bw 1); BW4=$(bw 4)
echo "disk read bandwidth (O_DIRECT, 4 MiB reads): 1 reader $BW1 MB/s, 4 readers $BW4 MB/s"
echo "{\"bw1_MBps\":$BW1,\"bw4_MBps\":$BW4,\"model_bytes\":$MODEL_B,\"cap_bytes\":$CAP_B}" > "$OUT/disk.json"

# ---- colibri under the cap, cold then warm ----
run_colibri() { # label, reps, extra args...
    _label=$1; _reps=$2; shift 2
    capped "$COLIBRI" bench -m "$MODEL" -p 1 -n "$NDEC" --reps "$_reps" --threads "$THREADS" --json --random-decode "$@" \
        > "$OUT/colibri-$_label.json" 2> "$OUT/colibri-$_label.err"
    _st=$?
    [ $_st -eq 0 ] || { echo "colibri $_label failed ($_st):"; tail -3 "$OUT/colibri-$_label.err"; }
    _peak=$(cat "$OUT/peak" 2>/dev/null || echo 0)
    "$PY" - "$OUT/colibri-$_label.json" "$_peak" "$BW4" "$_label" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); peak = int(sys.argv[2]); bw = float(sys.argv[3]) * 1e6
j["cgroup_peak_bytes"] = peak
bpt = j["bytes_read_per_token"]
bound = bw / bpt if bpt > 0 else float("inf")
j["io_bound_tok_s"] = bound
json.dump(j, open(sys.argv[1], "w"))
print("colibri %-6s decode %.2f tok/s | hit %.1f%% | read %.1f MB/token | recall %.1f%% | stall %.0f ms/token | "
      "RSS peak %.0f MiB | cgroup peak %.0f MiB | I/O bound %.2f tok/s -> %.0f%%" % (
      sys.argv[4], j["decode_tok_s"], 100 * j["hit_rate"], bpt / 1e6, 100 * j["lookahead_recall"],
      1e3 * j["stall_s_per_token"], j["peak_rss_bytes"] / 2**20, peak / 2**20, bound,
      100 * j["decode_tok_s"] / bound if bound > 0 else 0))
EOF
}
# ---- the engines under the same cap, taking turns ----
# Each round runs every engine cold (the model's pages evicted first) within a few minutes of
# each other, so a slow spell of the shared disk falls on all; ROUNDS rounds, medians.
#   colibri   default options: --mem-budget BUDGET alone (COLIBRI_ARGS adds options)
#   before    an older colibri (-B PATH), the same options: its own defaults
#   llama     llama-bench (-l PATH) on the mapping, and with LLAMA_RTR=1 also -rtr 1 (ik_llama.cpp's
#             run-time repack: the weights copied into anonymous memory at load)
run_llama() { # label, extra args...
    _label=$1; shift
    capped "$LLAMA" -m "$MODEL" -p 0 -n "$NDEC" -t "$THREADS" -r 1 -o json "$@" \
        > "$OUT/$_label.json" 2> "$OUT/$_label.err" || { echo "llama-bench $_label failed:"; tail -5 "$OUT/$_label.err"; }
    "$PY" - "$OUT/$_label.json" "$(cat "$OUT/peak" 2>/dev/null || echo 0)" "$_label" <<'EOF'
import json, sys
try:
    r = [x for x in json.load(open(sys.argv[1])) if x.get("n_gen", 0) > 0][0]
    print("%-14s decode %.2f tok/s | cgroup peak %.0f MiB" % (sys.argv[3], r["avg_ts"], int(sys.argv[2]) / 2**20))
except Exception as e:
    print("%s: no result (%s)" % (sys.argv[3], e))
EOF
}
HAVE_LLAMA=0
if [ -n "$LLAMA" ] && [ -x "$LLAMA" ]; then HAVE_LLAMA=1; else echo "llama.cpp: no llama-bench given (-l PATH): Colibri figures only"; fi
if [ -n "$BEFORE" ]; then cp "$BEFORE" "$OUT/colibri-before-bin" || exit 1; fi
ROUNDS=${ROUNDS:-${PAIRS:-3}}
for i in $(seq 1 "$ROUNDS"); do
    evict_file "$MODEL"
    [ "$i" -gt 1 ] || echo "page cache holds $(cached_mib "$MODEL") MiB of the model (cold)"
    # shellcheck disable=SC2086
    run_colibri "cold$i" 1 --mem-budget "$BUDGET" ${COLIBRI_ARGS:-}
    if [ -n "$BEFORE" ]; then
        evict_file "$MODEL"
        COLIBRI_SAVE=$COLIBRI; COLIBRI=$OUT/colibri-before-bin
        run_colibri "before$i" 1 --mem-budget "$BUDGET"
        COLIBRI=$COLIBRI_SAVE
    fi
    [ "$HAVE_LLAMA" = 0 ] || { evict_file "$MODEL"; run_llama "llama-cold$i"; }
    [ "$HAVE_LLAMA" = 0 ] || [ "${LLAMA_RTR:-0}" = 0 ] || { evict_file "$MODEL"; run_llama "llama-rtr$i" -rtr 1; }
done
[ "${BUFFERED:-1}" = 0 ] || { evict_file "$MODEL"; run_colibri buffered 1 --mem-budget "$BUDGET" --buffered-io; }
"$PY" - "$OUT" "$ROUNDS" <<'EOF'
import json, os, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
def get(p, f):
    try:
        return f(json.load(open(os.path.join(out, p))))
    except Exception:
        return None
R = range(1, n + 1)
tok = lambda j: j["decode_tok_s"]
llama = lambda j: [x for x in j if x.get("n_gen", 0) > 0][0]["avg_ts"]
series = {
    "colibri": [get("colibri-cold%d.json" % i, tok) for i in R],
    "before": [get("colibri-before%d.json" % i, tok) for i in R],
    "llama": [get("llama-cold%d.json" % i, llama) for i in R],
    "llama_rtr": [get("llama-rtr%d.json" % i, llama) for i in R],
}
frac = [get("colibri-cold%d.json" % i, lambda j: j["decode_tok_s"] / j["io_bound_tok_s"]) for i in R]
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
res = dict(series)
res.update({k + "_median": med(v) for k, v in series.items()})
res["colibri_io_bound_fraction"] = frac
res["io_bound_fraction_median"] = med(frac)
for k in ("before", "llama", "llama_rtr"):
    r = [c / o for c, o in zip(series["colibri"], series[k]) if c and o]
    res["ratio_vs_" + k] = r
    res["ratio_vs_" + k + "_median"] = med(r)
json.dump(res, open(os.path.join(out, "summary.json"), "w"), indent=1)
fmt = lambda v: " ".join("%.2f" % x if x else "-" for x in v)
print("colibri (default) decode tok/s: %s; median %.2f, %.0f%% of the I/O bound (median)" % (
    fmt(series["colibri"]), res["colibri_median"] or 0, 100 * (res["io_bound_fraction_median"] or 0)))
for k in ("before", "llama", "llama_rtr"):
    if res[k + "_median"]:
        print("%-9s decode tok/s: %s; median %.2f; colibri / %s per round: %s; median %.2fx" % (
            k, fmt(series[k]), res[k + "_median"], k, fmt(res["ratio_vs_" + k]), res["ratio_vs_" + k + "_median"] or 0))
EOF

BW4B=$(bw 4)
echo "disk read bandwidth after the runs: 4 readers $BW4B MB/s (the I/O bounds above use $BW4 MB/s, measured before)"

# ---- sweep: tok/s against the budget, no cap (O_DIRECT so the page cache does not help) ----
if [ "$SWEEP" -eq 1 ]; then
    : > "$OUT/sweep.tsv"
    for pct in 10 15 20 30 40 50 60 70 80 90 100; do
        b=$(( MODEL_B / 100 * pct ))
        "$COLIBRI" bench -m "$MODEL" -p 1 -n "$NDEC" --reps 1 --threads "$THREADS" --json --random-decode --mem-budget "$b" --direct-io \
            > "$OUT/sweep-$pct.json" 2> "$OUT/sweep-$pct.err" || { echo "sweep $pct% failed"; tail -2 "$OUT/sweep-$pct.err"; continue; }
        "$PY" -c "import json,sys;j=json.load(open(sys.argv[1]));print('%s\t%d\t%.3f\t%.4f\t%.0f' % (sys.argv[2], int(sys.argv[3]), j['decode_tok_s'], j['hit_rate'], j['bytes_read_per_token']))" \
            "$OUT/sweep-$pct.json" "$pct" "$b" >> "$OUT/sweep.tsv"
        tail -1 "$OUT/sweep.tsv"
    done
    "$PY" "$ROOT/bench/plot_budget.py" "$OUT/sweep.tsv" "$ROOT/docs/memory_budget.svg" "$MODEL_B"
fi
[ -n "$CG" ] && rmdir "$CG" 2>/dev/null
throttle_done
exit 0
