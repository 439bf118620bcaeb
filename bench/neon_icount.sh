#!/bin/sh
# bench/neon_icount.sh — instructions per 32-weight block (Q4_K: per 256-weight super-block)
# and weight row of the aarch64 products, counted under qemu-aarch64: the per-row NEON
# kernels (vec_dot, one row at a time) against the packed ones (16 rows a group, interleaved
# in memory, or row-major transposed in registers), for each NEON level.
#
#   sh bench/neon_icount.sh [COLS]     (default 4096; needs make CROSS=aarch64-linux-gnu- first)
#
# Debian's qemu-user ships no TCG plugins (no libinsn.so), so the count is qemu's own trace:
# -singlestep makes every instruction a translation block and -d nochain,exec logs each one
# executed. The driver (bench/neon_icount.c) runs one group of 16 rows against one token
# REPS times after the same setup, so count(REPS=3) - count(REPS=1) is two calls exactly;
# per call overheads (the per-row kernels' 16 calls and horizontal sums, the packed ones'
# loop setup and stores) are included, spread over the blocks.
set -eu
cd "$(dirname "$0")/.."
COLS=${1:-4096}
CC=${CROSS:-aarch64-linux-gnu-}gcc
LIB=build/aarch64/libcolibri.a
OUT=bench/build/aarch64
[ -f "$LIB" ] || { echo "neon_icount: build $LIB first (make CROSS=aarch64-linux-gnu- -j2)" >&2; exit 1; }
mkdir -p "$OUT"
$CC -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Iinclude -Isrc -static bench/neon_icount.c "$LIB" -lm -pthread \
    -o "$OUT/neon_icount"
count() { # ISA DTYPE MODE REPS -> executed instructions
    qemu-aarch64 -cpu max -singlestep -d nochain,exec "$OUT/neon_icount" "$1" "$2" "$3" "$COLS" "$4" 2>&1 >/dev/null |
        grep -c '^Trace'
}
printf '%-13s %-5s %-9s %12s %12s\n' isa type kernel "per block" "per blk·row"
for isa in neon neon+dotprod neon+i8mm; do
    for t in q8_0 q4_0 q4_k; do
        case $t in q4_k) bs=256 ;; *) bs=32 ;; esac
        nb=$((COLS / bs))
        for mode in row packed rowmajor; do
            a=$(count "$isa" "$t" "$mode" 1)
            b=$(count "$isa" "$t" "$mode" 3)
            # instructions per block of 16 rows, and per block of one row
            awk -v d=$((b - a)) -v nb="$nb" -v isa="$isa" -v t="$t" -v m="$mode" \
                'BEGIN { g = d / 2 / nb; printf "%-13s %-5s %-9s %12.1f %12.2f\n", isa, t, m, g, g / 16 }'
        done
    done
done
