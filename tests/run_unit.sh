#!/bin/sh
# Runs each cmocka unit-test binary given as an argument (under $RUNNER, e.g. qemu-aarch64,
# when set), prints its seconds, then one summary line: "unit: N passed, M failed".
pass=0; fail=0; failed=""
for t in "$@"; do
    t0=$(date +%s)
    if $RUNNER "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $t"; fi
    echo "($(basename "$t"): $(($(date +%s) - t0)) s)"
done
[ -n "$failed" ] && echo "failed test programs:$failed"
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
