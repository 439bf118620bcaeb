#!/bin/sh
# Decode latency alone and under competition (docs/REALTIME.md).
#   bench/latency.sh [-b COLIBRI] [-m MODEL] [-k COMPETITORS] [-- bench options...]
# Runs `colibri bench -p 16 -n 256 --reps 3 --json` (plus the options after --) twice: alone,
# then with COMPETITORS CPU-bound processes (default: one per online CPU) started beside it,
# and prints one line per run: p50 / p99 / p99.9 / max per decoded token (ms), the p99/p50
# ratio and tokens/s. The competitors are ended (by their process ids) when the run is over.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build/x86_64/colibri
MODEL=$ROOT/models/colibri-tiny.colibri
K=$(getconf _NPROCESSORS_ONLN)
while [ $# -gt 0 ]; do
    case $1 in
    -b) BIN=$2; shift 2 ;;
    -m) MODEL=$2; shift 2 ;;
    -k) K=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "latency.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
PIDS=""
stop() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; PIDS=""; }
trap stop EXIT INT TERM
one() { # LABEL
    out=$("$BIN" bench -m "$MODEL" -p 16 -n 256 --reps 3 --json "$@" 2>/dev/null) || { echo "$label: bench failed"; return 1; }
    echo "$out" | /usr/bin/python3 -c '
import json, sys
j = json.loads(sys.stdin.read()); label = sys.argv[1]
p50, p99 = j["decode_p50_ms"], j["decode_p99_ms"]
f = lambda k: "%8.3f" % j[k] if k in j else "     n/a"  # older binaries: no p99.9 / max
print("%-44s p50 %8.3f  p99 %8.3f  p99.9 %s  max %s ms  p99/p50 %6.1f  %8.1f tok/s" %
      (label, p50, p99, f("decode_p999_ms"), f("decode_max_ms"), p99 / p50 if p50 > 0 else 0, j["decode_tok_s"]))' "$label"
}
label="alone      $*"
one "$@"
i=0
while [ "$i" -lt "$K" ]; do
    /usr/bin/python3 -c 'while True: pass' &
    PIDS="$PIDS $!"
    i=$((i + 1))
done
sleep 0.5
label="$K competing $*"
one "$@"
stop
