#!/bin/sh
# integration: alone (it measures time, page-cache residency or RSS: no other script beside it)
# The real-time options (docs/REALTIME.md) through the CLI and the config file on the bundled
# model: pinning, wait policies, mlock and SCHED_FIFO change nothing in the output (a refused
# one is a one-line warning, not a failure); bad values are one-line errors; bench reports
# the decode percentiles, and bench/latency.sh runs alone and under competition.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
M="$ROOT/models/colibri-tiny.colibri"
CPU0=$("$PYTHON" -c 'import os; print(min(os.sched_getaffinity(0)))')
CPUS=$("$PYTHON" -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
gen() { # OUT [args]: 24 greedy tokens after a fixed prompt, logits of the prompt
    o=$1; shift
    "$COLIBRI" run -m "$M" --tokens 1,50,60,70 -n 24 --dump-logits "$o.bin" "$@" >"$o.txt" 2>"$o.err" ||
        { fail "run $*: $(cat "$o.err")"; return 1; }
    return 0
}
gen "$WORK/ref" -t 2
for opts in "--cpus $CPU0 -t 3" "--cpus $CPUS --wait-policy yield --spin-us 200" "--wait-policy futex -t 3" \
    "--wait-policy spin -t 2" "--wait-policy hybrid --spin-us 1 -t 2" "--mlock -t 2" "--rt-priority 1 -t 2" \
    "--io-cpus $CPU0 --mem-budget 6MiB -t 2"; do
    # shellcheck disable=SC2086 # opts: several words
    gen "$WORK/o" $opts || continue
    cmp -s "$WORK/ref.txt" "$WORK/o.txt" || fail "$opts: different tokens"
    cmp -s "$WORK/ref.bin" "$WORK/o.bin" || fail "$opts: different logits"
    # at most one warning line, and only about what was refused
    n=$(grep -v -c '^colibri: prompt .* tokens in' "$WORK/o.err")
    w=$(grep -c '^colibri: warning: ' "$WORK/o.err")
    [ "$w" -le 1 ] || fail "$opts: $w warning lines"
    [ "$w" -eq 0 ] || echo "$opts: $(cat "$WORK/o.err")"
    case "$opts" in --mem-budget*|*--mem-budget*) ;; *) [ "$n" -eq "$w" ] || fail "$opts: stderr: $(cat "$WORK/o.err")" ;; esac
done
# the same settings from the config file
printf '{"cpus": "%s", "io_cpus": "%s", "wait_policy": "yield", "spin_us": 100, "mlock": true, "rt_priority": 0, "threads": 2}\n' \
    "$CPU0" "$CPU0" >"$WORK/rt.json"
gen "$WORK/c" --config "$WORK/rt.json" && { cmp -s "$WORK/ref.bin" "$WORK/c.bin" || fail "config: different logits"; }
# bad values: exit 2 (CLI) or 1 (init), one line naming the option
bad() { # EXPECTED-TEXT args...
    want=$1; shift
    "$COLIBRI" run -m "$M" --tokens 1,2 -n 1 "$@" >/dev/null 2>"$WORK/bad.err"
    st=$?
    { [ "$st" -eq 1 ] || [ "$st" -eq 2 ]; } || fail "$*: exit status $st"
    [ "$(grep -c . "$WORK/bad.err")" -eq 1 ] || fail "$*: not one line: $(cat "$WORK/bad.err")"
    grep -q -- "$want" "$WORK/bad.err" || fail "$*: message lacks '$want': $(cat "$WORK/bad.err")"
}
bad "cpus" --cpus 3-1
bad "--cpus" --cpus x
bad "cpus" --cpus 0-99999
bad "--rt-priority" --rt-priority 100
bad "--wait-policy" --wait-policy busy
bad "--spin-us" --spin-us -5
for kv in '"cpus": 3' '"cpus": "1-"' '"wait_policy": "fast"' '"rt_priority": 120' '"rt_priority": -2e84' '"spin_us": 1e300' '"mlock": 2' '"spin_us": 1.5'; do
    echo "{$kv}" >"$WORK/bad.json"
    bad "bad.json" --config "$WORK/bad.json"
done
# bench: the decode percentiles, plain and JSON
"$COLIBRI" bench -m "$M" -p 8 -n 32 --reps 1 -t 2 --wait-policy yield >"$WORK/b.txt" 2>"$WORK/b.err" ||
    fail "bench: $(cat "$WORK/b.err")"
grep -q 'p50 .* ms, p99 .* ms, p99.9 .* ms, max .* ms' "$WORK/b.txt" || fail "bench text: $(cat "$WORK/b.txt")"
"$COLIBRI" bench -m "$M" -p 8 -n 32 --reps 1 -t 2 --json >"$WORK/b.json" 2>"$WORK/b.err" || fail "bench --json: $(cat "$WORK/b.err")"
"$PYTHON" - "$WORK/b.json" <<'PY' || fail "bench --json percentiles"
import json, sys
j = json.load(open(sys.argv[1]))
assert 0 < j['decode_p50_ms'] <= j['decode_p99_ms'] <= j['decode_p999_ms'] <= j['decode_max_ms'], j
PY
# bench --parallel N: N sequences in batched steps (a server's step with N streams); each
# step decodes a token of every sequence, so a step takes longer than one token alone while
# the aggregate counts N tokens per step
"$COLIBRI" bench -m "$M" -p 8 -n 16 --reps 1 -t 2 --parallel 3 --random-decode --json >"$WORK/bp.json" 2>"$WORK/b.err" ||
    fail "bench --parallel: $(cat "$WORK/b.err")"
"$PYTHON" - "$WORK/bp.json" <<'PY' || fail "bench --parallel 3: $(cat "$WORK/bp.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j['parallel'] == 3 and j['kv_bytes'] >= 3 * 25 * j['kv_bytes_per_token'], j  # 3 regions of 8 + 16 + 1 positions
assert 0 < j['decode_p50_ms'] <= j['decode_max_ms'] and j['decode_tok_s'] > 0 and j['prefill_tok_s'] > 0, j
PY
# the latency bench (bench/latency.sh, docs/REALTIME.md): alone, then beside one CPU-bound
# process per CPU; one line each with the percentiles (figures are for the closing notes,
# not asserted: the machine is shared)
sh "$ROOT/bench/latency.sh" -b "$COLIBRI" -m "$M" -- -n 64 -t 2 >"$WORK/lat.txt" 2>&1 || fail "bench/latency.sh: $(cat "$WORK/lat.txt")"
[ "$(grep -c '^alone .* p50 .* p99 .* p99.9 .* p99/p50 .* tok/s$' "$WORK/lat.txt")" -eq 1 ] &&
    [ "$(grep -c '^[0-9]* competing .* p50 .* p99 .* p99.9 .* p99/p50 .* tok/s$' "$WORK/lat.txt")" -eq 1 ] ||
    fail "bench/latency.sh output: $(cat "$WORK/lat.txt")"
[ "$FAILS" -eq 0 ]
