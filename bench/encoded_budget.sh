#!/bin/sh
# encoded_budget.sh — decode tok/s of one model stored plain, zstd-compressed and
# AES-256-GCM-encrypted (.colibri version 2, docs/FORMAT.md), in the bounded mode under a
# memory cap that counts the page cache (docs/benchmarks.md, "Encoded containers"). Not run
# in CI; needs root for the cgroup.
#
#   sh bench/encoded_budget.sh -k KEYFILE [-c CAP] [-b BUDGET] [-r RATE] [-o OUTDIR] LABEL=FILE...
#
#   LABEL=FILE   the files to compare (e.g. plain=m.colibri zstd=mz.colibri enc=me.colibri);
#                they take turns, one cold run each per round
#   KEYFILE      the key of the encrypted ones (colibri keygen)
#   CAP          cgroup memory cap, page cache included (default 1536M)
#   BUDGET       colibri --mem-budget inside the cap (default 1400M)
#   RATE         read bandwidth of the device holding the files, in bytes/s (e.g. 1100M),
#                set with the blkio controller's throttle: a device's storage (eMMC, SD,
#                a USB or NVMe SSD) on a machine whose virtual disk reads from the host's
#                cache at several GB/s (default: no throttle)
#
# Environment: ROUNDS (5), NDEC (decoded tokens, 16), THREADS (2), EXTRA (more bench
# arguments, default --direct-io). Each run is cold: every file's pages are evicted with
# posix_fadvise(DONTNEED) first (drop_caches is read-only in this container). Prints one line
# per run, then the median tok/s of each file and its median ratio to the first file's run of
# the same round.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CAP=1536M
BUDGET=1400M
KEY=""
RATE=""
OUT=${TMPDIR:-/tmp}/colibri-encbench
PY=/usr/bin/python3
COLIBRI=${COLIBRI:-$ROOT/build/x86_64/colibri}
ROUNDS=${ROUNDS:-5}
NDEC=${NDEC:-16}
THREADS=${THREADS:-2}
EXTRA=${EXTRA:---direct-io}
FILES=""
while [ $# -gt 0 ]; do
    case "$1" in
    -k) KEY=$2; shift 2 ;;
    -c) CAP=$2; shift 2 ;;
    -b) BUDGET=$2; shift 2 ;;
    -r) RATE=$2; shift 2 ;;
    -o) OUT=$2; shift 2 ;;
    *=*) FILES="$FILES $1"; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$FILES" ] || { echo "usage: $0 -k KEYFILE [-c CAP] [-b BUDGET] LABEL=FILE..." >&2; exit 2; }
mkdir -p "$OUT"
cp "$COLIBRI" "$OUT/colibri" || exit 1 # private copy: other builds may relink the binary
COLIBRI=$OUT/colibri
bytes() { "$PY" -c "import sys;s=sys.argv[1];m={'K':1<<10,'M':1<<20,'G':1<<30};print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))" "$1"; }
CAP_B=$(bytes "$CAP")

CG=""
if [ -d /sys/fs/cgroup/memory ]; then # cgroup v1: memory.limit_in_bytes counts the page cache
    CG=/sys/fs/cgroup/memory/colibri-encbench
    mkdir -p "$CG" && echo "$CAP_B" >"$CG/memory.limit_in_bytes" || CG=""
    PEAK_FILE=memory.max_usage_in_bytes
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then # cgroup v2: memory.max does too
    CG=/sys/fs/cgroup/colibri-encbench
    mkdir -p "$CG" && echo "$CAP_B" >"$CG/memory.max" || CG=""
    PEAK_FILE=memory.peak
fi
[ -n "$CG" ] || { echo "no memory cgroup available (root needed): refusing to run uncapped" >&2; exit 1; }

# shellcheck source=bench/throttle.sh
. "$ROOT/bench/throttle.sh"
if [ -n "$RATE" ]; then
    set --
    for lf in $FILES; do set -- "$@" "${lf#*=}"; done
    throttle_setup "$(bytes "$RATE")" colibri-encbench "$@" || exit 1
fi
echo "cap $CAP ($CAP_B bytes, page cache included, $CG), budget $BUDGET, $THREADS threads, $NDEC tokens, $EXTRA${RATE:+, reads throttled to $RATE/s}"

evict() { "$PY" -c "import os,sys;fd=os.open(sys.argv[1],os.O_RDONLY);os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$1"; }
: >"$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
    for lf in $FILES; do
        label=${lf%%=*}; file=${lf#*=}
        for x in $FILES; do evict "${x#*=}"; done
        [ "$PEAK_FILE" = memory.max_usage_in_bytes ] && echo 0 >"$CG/$PEAK_FILE"
        # shellcheck disable=SC2086
        throttled sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$CG" nice "$COLIBRI" --key-file "$KEY" bench -m "$file" -p 1 \
            -n "$NDEC" --reps 1 --threads "$THREADS" --json --random-decode --mem-budget "$BUDGET" $EXTRA \
            >"$OUT/$label.$r.json" 2>"$OUT/$label.$r.err" || { echo "$label round $r failed: $(tail -1 "$OUT/$label.$r.err")"; continue; }
        peak=$(cat "$CG/$PEAK_FILE")
        "$PY" - "$OUT/$label.$r.json" "$label" "$r" "$peak" >>"$OUT/runs.tsv" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print("%s\t%s\t%.4f\t%.4f\t%.0f\t%d\t%d" % (sys.argv[2], sys.argv[3], j["decode_tok_s"], j["hit_rate"],
      j["bytes_read_per_token"], j["peak_rss_bytes"], int(sys.argv[4])))
EOF
        tail -1 "$OUT/runs.tsv" | awk -F'\t' '{printf "round %s %-6s %.3f tok/s  hit %.1f%%  %.0f MB/token  RSS %.0f MiB  cgroup peak %.0f MiB\n", $2, $1, $3, 100*$4, $5/1e6, $6/1048576, $7/1048576}'
    done
done
rmdir "$CG" 2>/dev/null
throttle_done
"$PY" - "$OUT/runs.tsv" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
labels = list(dict.fromkeys(r[0] for r in rows))
tok = {(r[0], r[1]): float(r[2]) for r in rows}
first = labels[0]
for lab in labels:
    v = [t for (l, _), t in tok.items() if l == lab]
    ratios = [tok[(lab, rd)] / tok[(first, rd)] for (l, rd) in tok if l == lab and (first, rd) in tok]
    print("%-6s median %.3f tok/s over %d runs (%s); vs %s per round: median %.3f (%s)" % (
        lab, statistics.median(v), len(v), " ".join("%.3f" % x for x in v), first,
        statistics.median(ratios), " ".join("%.3f" % x for x in ratios)))
EOF
