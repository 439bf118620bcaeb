#!/bin/sh
# Runs every tests/integration/*.sh with COLIBRI (the CLI) and PYTHON set; each script exits
# 0 on success. Prints each script's seconds, then "integration: N passed, M failed".
pass=0; fail=0; failed=""
export COLIBRI PYTHON BUILD
TMPROOT=${TMPDIR:-/tmp}/colibri-it.$$
mkdir -p "$TMPROOT"
for t in tests/integration/*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    out="$TMPROOT/$name.log"
    t0=$(date +%s)
    if WORK="$TMPROOT/$name" sh "$t" >"$out" 2>&1; then ok=1; else ok=0; fi
    secs=$(($(date +%s) - t0))
    if [ "$ok" -eq 1 ]; then
        pass=$((pass + 1)); echo "PASS $name ($secs s)"
    else
        fail=$((fail + 1)); failed="$failed $name"; echo "FAIL $name ($secs s)"
        # the lines that name the failed checks (they may lie above the tail), then the tail
        grep -n -i "fail\|error\|mismatch\|differ" "$out" | grep -v "^[0-9]*:ok\b" | head -30 | sed 's/^/    ! /'
        sed 's/^/    /' "$out" | tail -40
    fi
done
rm -rf "$TMPROOT"
echo "integration: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
