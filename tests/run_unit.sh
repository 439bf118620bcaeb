#!/bin/sh
# Runs each cmocka unit-test binary given as an argument (under $RUNNER, e.g. qemu-aarch64,
# when set), prints its seconds, then one summary line: "unit: N passed, M failed".
# A program still running after UNIT_TIMEOUT seconds (default 1200) is killed and fails, so a
# hang costs minutes, not the whole CI budget.
pass=0; fail=0; failed=""
limit=${UNIT_TIMEOUT:-1200}
for t in "$@"; do
    t0=$(date +%s)
    # shellcheck disable=SC2086 # RUNNER: a command and its options, or nothing
    timeout -k 10 "$limit" $RUNNER "$t"; rc=$?
    if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $t"; fi
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "$(basename "$t"): killed after $limit s${RUNNER:+ under $RUNNER}"
        # the one hang seen: qemu-user running the cross ld.so against the multiarch libc
        [ -n "$RUNNER" ] && echo "  (does $RUNNER load one glibc? ld.so and libc.so.6 of different builds hang at the first pthread_create)"
    fi
    echo "($(basename "$t"): $(($(date +%s) - t0)) s)"
done
[ -n "$failed" ] && echo "failed test programs:$failed"
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
