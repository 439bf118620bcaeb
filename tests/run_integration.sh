#!/bin/sh
# Runs every tests/integration/*.sh with COLIBRI (the CLI) and PYTHON set; each script exits
# 0 on success. Prints each script's seconds, then "integration: N passed, M failed".
# INTEGRATION_JOBS scripts (default 2) run at once: many of them wait on python, mpirun or a
# server for much of their time and use well under a core. A script whose first 12 lines say
# "integration: alone" (it measures time, page-cache residency or RSS) runs after the others,
# by itself.
if [ "${1:-}" = "--one" ]; then # --one SCRIPT: run one script under $TMPROOT, print its result
    t=$2; name=$(basename "$t" .sh); out="$TMPROOT/$name.log"
    t0=$(date +%s)
    if WORK="$TMPROOT/$name" sh "$t" >"$out" 2>&1; then ok=1; else ok=0; fi
    secs=$(($(date +%s) - t0))
    if [ "$ok" -eq 1 ]; then
        echo "PASS $name ($secs s)" >"$TMPROOT/$name.res"
    else
        {
            echo "FAIL $name ($secs s)"
            # the lines that name the failed checks (they may lie above the tail), then the tail
            grep -n -i "fail\|error\|mismatch\|differ" "$out" | grep -v "^[0-9]*:ok\b" | head -30 | sed 's/^/    ! /'
            sed 's/^/    /' "$out" | tail -40
        } >"$TMPROOT/$name.res"
    fi
    cat "$TMPROOT/$name.res" # one write per script, so that parallel results do not interleave
    exit 0
fi
export COLIBRI PYTHON BUILD
TMPROOT=${TMPDIR:-/tmp}/colibri-it.$$
export TMPROOT
mkdir -p "$TMPROOT"
JOBS=${INTEGRATION_JOBS:-2}
self=$0
alone=""; shared=""
for t in tests/integration/*.sh; do
    [ -f "$t" ] || continue
    if head -12 "$t" | grep -q "integration: alone"; then alone="$alone $t"; else shared="$shared $t"; fi
done
# shellcheck disable=SC2086
[ -z "$shared" ] || printf '%s\n' $shared | xargs -n 1 -P "$JOBS" sh "$self" --one
for t in $alone; do sh "$self" --one "$t"; done
pass=0; fail=0; failed=""
for t in $shared $alone; do # a script with no result (its runner was killed) failed
    name=$(basename "$t" .sh)
    if head -1 "$TMPROOT/$name.res" 2>/dev/null | grep -q "^PASS"; then pass=$((pass + 1))
    else fail=$((fail + 1)); failed="$failed $name"; fi
done
rm -rf "$TMPROOT"
[ -z "$failed" ] || echo "failed:$failed"
echo "integration: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
