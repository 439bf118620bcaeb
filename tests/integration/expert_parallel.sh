#!/bin/sh
# Expert parallelism over MPI (colibri-mpi, docs/SCALE.md): on 2 and 4 ranks of one machine the
# fixture MoE models give logits and tokens bit-identical to one process, unbounded and with a
# memory budget or a small expert pool (each rank reads only its experts); ranks with different
# model files refuse to start; a rank killed or stopped mid-run ends the job with a message in
# bounded time.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
MPI="$(dirname "$COLIBRI")/colibri-mpi"
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$MPI" ]; then
    fail "mpirun or $MPI missing (make deps installs openmpi-bin and libopenmpi-dev; make builds colibri-mpi)"
    finish expert_parallel
fi
# CI runs as root; Open MPI refuses root without these
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
# the sanitizer build: Open MPI's own allocations that live until exit are not ours. Its
# components stay loaded (no dlclose at MPI_Finalize) so that LeakSanitizer can name the
# library of each frame, and full unwinding finds them through frames without frame pointers.
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="suppressions=$ROOT/tests/reference/openmpi.lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
mpi() { # NP OUT [run args]: colibri-mpi run on NP ranks, logits in OUT, ids in OUT.ids
    _np=$1; _o=$2; shift 2
    timeout 300 mpirun -np "$_np" --oversubscribe "$MPI" run --tokens "$toks" -n 4 -t 1 --dump-logits "$_o" "$@" \
        >"$_o.ids" 2>"$_o.err" || { fail "mpirun -np $_np run $*: $(grep -v '^colibri: prompt' "$_o.err" | head -5)"; return 1; }
}
one() { # OUT [run args]: the same run in one process
    _o=$1; shift
    "$COLIBRI" run --tokens "$toks" -n 4 -t 1 --dump-logits "$_o" "$@" >"$_o.ids" 2>"$_o.err" \
        || { fail "run $*: $(tail -1 "$_o.err")"; return 1; }
}
same() { # A B what
    cmp -s "$1" "$2" || fail "$3: logits differ from one process"
    cmp -s "$1.ids" "$2.ids" || fail "$3: tokens differ from one process"
}
# 1. unbounded: the experts served from the file mapping, each rank touching its own
for m in mixtral olmoe qwen2moe; do
    toks=$(csv "$(cat "$FX/$m/tokens.txt")")
    M="$FX/$m/model-f32.gguf"
    one "$WORK/$m.1" -m "$M" || continue
    for np in 2 4; do
        mpi $np "$WORK/$m.$np" -m "$M" || continue
        same "$WORK/$m.1" "$WORK/$m.$np" "$m on $np ranks"
        n=$(grep -c "^colibri-mpi: rank [0-9]*/$np: .* of expert rows" "$WORK/$m.$np.err")
        [ "$n" -eq "$np" ] || fail "$m on $np ranks: $n rank reports, not $np"
    done
    echo "$m: logits bit-identical on 1, 2 and 4 ranks"
done
# 1b. per-rank memory, unbounded: a rank holds the dense weights and its share of the routed
#     experts, never another rank's. A benchmark-shaped file (OLMoE shapes, 2 layers, q4_0) and
#     a 64-token prompt, which routes to nearly every expert: one process's peak RSS holds the
#     file's dense and expert bytes (checked), so peak - experts is the dense part plus the
#     process's own memory; each of 2 ranks must stay within that + 0.6 x the experts, each of
#     4 within that + 0.35 x (their shares are 1/2 and 1/4).
if "${PYTHON:-/usr/bin/python3}" "$ROOT/tools/gen_gguf.py" --model olmoe --dtype q4_0 --layers 2 -o "$WORK/olmoe.gguf" \
    >/dev/null 2>"$WORK/gen.err"; then
    sizes=$("$COLIBRI" inspect "$WORK/olmoe.gguf" | sed -n 's/^tensors: .*(dense \([0-9.]*\) MiB, routed experts \([0-9.]*\) MiB).*/\1 \2/p')
    dense=${sizes% *}
    exps=${sizes#* }
    toks=$(seq 100 163 | paste -sd, -)
    peaks() { sed -n 's/^colibri-mpi: rank .* peak RSS \([0-9.]*\) MiB.*/\1/p' "$1"; }
    if [ -n "$sizes" ] && mpi 1 "$WORK/ol.1" -m "$WORK/olmoe.gguf"; then
        p1=$(peaks "$WORK/ol.1.err")
        awk -v p="$p1" -v d="$dense" -v x="$exps" 'BEGIN { exit !(p >= d + 0.9 * x) }' \
            || fail "one rank's peak RSS $p1 MiB does not hold the file's dense $dense + experts $exps MiB"
        base=$(awk -v p="$p1" -v x="$exps" 'BEGIN { printf "%.1f", p - x }')
        for np in 2 4; do
            mpi $np "$WORK/ol.$np" -m "$WORK/olmoe.gguf" || continue
            same "$WORK/ol.1" "$WORK/ol.$np" "olmoe-shaped file on $np ranks"
            share=$(awk -v n=$np 'BEGIN { print (n == 2 ? 0.6 : 0.35) }')
            lim=$(awk -v b="$base" -v x="$exps" -v f="$share" 'BEGIN { printf "%.1f", b + f * x }')
            for p in $(peaks "$WORK/ol.$np.err"); do
                awk -v p="$p" -v l="$lim" 'BEGIN { exit !(p <= l) }' \
                    || fail "$np ranks: a rank's peak RSS is $p MiB, over $lim MiB (dense + own memory $base + $share x experts $exps)"
            done
            echo "per-rank peak RSS, $np ranks: $(peaks "$WORK/ol.$np.err" | paste -sd' ' -) MiB (limit $lim; one process $p1 MiB; dense $dense, experts $exps MiB)"
        done
    fi
    rm -f "$WORK/olmoe.gguf"
else
    fail "tools/gen_gguf.py: $(tail -1 "$WORK/gen.err")"
fi
# 2. bounded: a memory budget, and a pool of 2 experts (208 KiB each in q8_0)
toks=$(csv "$(cat "$FX/mixtral/tokens.txt")")
colibri_convert "$FX/mixtral/hf" "$WORK/mx.colibri" --dtype q8_0 || finish expert_parallel
i=0
for mode in "--mem-budget 12M" "--expert-pool 450K"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    one "$WORK/b$i.1" -m "$WORK/mx.colibri" $mode || continue
    for np in 2 4; do
        # shellcheck disable=SC2086
        mpi $np "$WORK/b$i.$np" -m "$WORK/mx.colibri" $mode || continue
        same "$WORK/b$i.1" "$WORK/b$i.$np" "$mode on $np ranks"
    done
    echo "$mode: logits bit-identical on 1, 2 and 4 ranks"
done
# each rank reads only its share: with 4 ranks no rank's pool reads what one process reads
full=$(sed -n 's/.* \([0-9.]*\) MiB read.*/\1/p' "$WORK/b1.1.err")
for r in $(sed -n 's/.* \([0-9.]*\) MiB read.*/\1/p' "$WORK/b1.4.err"); do
    awk -v a="$r" -v b="$full" 'BEGIN { exit !(a < b) }' || fail "a rank read $r MiB of experts, one process $full MiB"
done
# 3. a different model file on one rank: a message, no run
cp "$WORK/mx.colibri" "$WORK/other.colibri"
printf 'x' >>"$WORK/other.colibri"
if timeout 120 mpirun --oversubscribe -np 1 "$MPI" run -m "$WORK/mx.colibri" --tokens 1,2 -n 1 : \
    -np 1 "$MPI" run -m "$WORK/other.colibri" --tokens 1,2 -n 1 >/dev/null 2>"$WORK/mm.err"; then
    fail "ranks with different model files ran"
else
    grep -q "rank 1's model file differs from rank 0's" "$WORK/mm.err" || fail "mismatch not reported: $(head -3 "$WORK/mm.err")"
fi
# 4. a rank that dies (SIGKILL) or hangs (SIGSTOP; COLIBRI_MPI_TIMEOUT) mid-run ends the job
#    (with the sanitizer's fast unwinding: full unwinding at every malloc slows the start so
#    much that the signal could come before MPI_Init; these jobs end killed, leaks unchecked)
for sig in KILL STOP; do
    LSAN_OPTIONS=${LSAN_OPTIONS%:fast_unwind_on_malloc=0} COLIBRI_MPI_TIMEOUT=3 mpirun -np 4 --oversubscribe "$MPI" run -m "$FX/mixtral/model-f32.gguf" --tokens 1,2,3 \
        -n 30000 -t 1 --max-seq-len 32768 >/dev/null 2>"$WORK/$sig.err" &
    P=$!
    sleep 3
    R=$(ps -o pid= --ppid $P | sed -n 2p)
    [ -n "$R" ] || { fail "$sig: no rank process under mpirun $P"; wait $P; continue; }
    t0=$(date +%s)
    kill -s $sig $R
    w=0
    while kill -0 $P 2>/dev/null && [ $w -lt 60 ]; do sleep 1; w=$((w + 1)); done
    if kill -0 $P 2>/dev/null; then
        fail "$sig: the job still runs 60 s after a rank was stopped"
        kill -s KILL $P
    fi
    wait $P && fail "$sig: the job ended with status 0"
    echo "SIG$sig of one rank: the job ended after $(( $(date +%s) - t0 )) s"
    case $sig in
    KILL) grep -q "exited on signal 9" "$WORK/$sig.err" || fail "KILL: no message: $(head -5 "$WORK/$sig.err")" ;;
    STOP) grep -q "no answer from the other ranks within 3 s" "$WORK/$sig.err" || fail "STOP: no message: $(head -5 "$WORK/$sig.err")" ;;
    esac
done
# 5. serve: rank 0 serves HTTP, the other rank replays its engine calls; greedy answers
#    (a completion with logprobs, a chat, two requests at once) identical to one process's
#    server; SIGTERM to rank 0 ends the whole job
srv_start() { # ERR CMD...: in the background; SPID its pid, SPORT its port (empty: it failed)
    _e=$1; shift
    "$@" >/dev/null 2>"$_e" &
    SPID=$!
    SPORT=$(serve_port "$_e" $SPID)
}
srv_end() { # PID WHAT: waits up to 60 s for PID to end with status 0
    _w=0
    while kill -0 "$1" 2>/dev/null && [ $_w -lt 60 ]; do sleep 1; _w=$((_w + 1)); done
    if kill -0 "$1" 2>/dev/null; then
        fail "$2: still running 60 s after SIGTERM"
        kill -s KILL "$1"
    fi
    wait "$1" || fail "$2: ended with a failure status"
}
ask() { # PORT PATH BODY OUT: the answer without its id, creation time and cached-token count
    # (which slot's cache a request finds depends on which of two concurrent ones came first)
    curl -sS --max-time 300 "http://127.0.0.1:$1$2" -H 'Content-Type: application/json' -d "$3" 2>&1 \
        | sed 's/"id":"[^"]*",//; s/"created":[0-9]*,//; s/,"prompt_tokens_details":{[^}]*}//' >"$4"
}
Q1='{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"logprobs":2}'
Q2='{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":16,"temperature":0}'
Q3='{"prompt":"The little dog","max_tokens":20,"temperature":0}'
queries() { # PORT TAG
    ask "$1" /v1/completions "$Q1" "$WORK/q1.$2"
    ask "$1" /v1/chat/completions "$Q2" "$WORK/q2.$2"
    ask "$1" /v1/completions "$Q3" "$WORK/q3.$2" &
    _a=$!
    ask "$1" /v1/completions "$Q1" "$WORK/q4.$2"
    wait $_a
}
TINY="$ROOT/models/colibri-tiny.colibri"
srv_start "$WORK/s1.err" "$COLIBRI" serve -m "$TINY" --port 0 -t 1 --parallel 2
if [ -n "$SPORT" ]; then
    queries "$SPORT" one
    kill -s TERM $SPID
    srv_end $SPID "serve"
else
    fail "serve did not start: $(tail -3 "$WORK/s1.err")"
    kill $SPID 2>/dev/null
fi
srv_start "$WORK/s2.err" mpirun -np 2 --oversubscribe "$MPI" serve --expert-parallel -m "$TINY" --port 0 -t 1 --parallel 2
if [ -n "$SPORT" ]; then
    queries "$SPORT" mpi
    for q in 1 2 3 4; do
        grep -q '"choices"' "$WORK/q$q.one" || fail "serve: request $q: $(head -c 300 "$WORK/q$q.one")"
        cmp -s "$WORK/q$q.one" "$WORK/q$q.mpi" || fail "serve on 2 ranks: request $q answered $(head -c 300 "$WORK/q$q.mpi")"
    done
    R0=
    for c in $(ps -o pid= --ppid $SPID); do
        tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && R0=$c
    done
    if [ -n "$R0" ]; then
        kill -s TERM "$R0"
        srv_end $SPID "serve on 2 ranks"
        n=$(grep -c "^colibri-mpi: rank [01]/2: " "$WORK/s2.err")
        [ "$n" -eq 2 ] || fail "serve on 2 ranks: $n rank reports after SIGTERM, not 2: $(tail -3 "$WORK/s2.err")"
    else
        fail "serve on 2 ranks: no rank 0 process under mpirun $SPID"
        kill -s TERM $SPID
        wait $SPID
    fi
    echo "serve on 2 ranks: 4 greedy answers identical to one process's server"
else
    fail "serve on 2 ranks did not start: $(tail -3 "$WORK/s2.err")"
    kill $SPID 2>/dev/null
fi
# 6. --placement FILE: the usage file of a one-process run (--usage-stats) places the experts
#    by measured heat: logits still identical; each MoE exchange waits for its busiest rank,
#    whose share of the exchange's expert rows (averaged) is no larger than with round robin
#    on the run the file measured; a missing, malformed or other-shaped file: one line, no run
toks=$(csv "$(cat "$FX/mixtral/tokens.txt")")
cp "$FX/mixtral/model-f32.gguf" "$WORK/pl.gguf"
busiest() { sed -n "s/.*the busiest rank's \([0-9.]*\)% on average.*/\1/p" "$1"; }
pl_run() { # NP OUT [args]: 64 tokens generated on NP ranks
    _np=$1; _o=$2; shift 2
    timeout 300 mpirun -np "$_np" --oversubscribe "$MPI" run --tokens "$toks" -n 64 -t 1 --dump-logits "$_o" "$@" \
        >"$_o.ids" 2>"$_o.err" || { fail "mpirun -np $_np run $*: $(grep -v '^colibri: prompt' "$_o.err" | head -5)"; return 1; }
}
if "$COLIBRI" run --tokens "$toks" -n 64 -t 1 -m "$WORK/pl.gguf" --usage-stats --dump-logits "$WORK/pl.1" \
    >"$WORK/pl.1.ids" 2>"$WORK/pl.1.err" && [ -s "$WORK/pl.gguf.usage" ]; then
    for np in 2 4; do
        pl_run $np "$WORK/pl.rr$np" -m "$WORK/pl.gguf" || continue
        pl_run $np "$WORK/pl.pl$np" -m "$WORK/pl.gguf" --placement "$WORK/pl.gguf.usage" || continue
        same "$WORK/pl.1" "$WORK/pl.pl$np" "--placement on $np ranks"
        rr=$(busiest "$WORK/pl.rr$np.err")
        pl=$(busiest "$WORK/pl.pl$np.err")
        grep -q "(--placement placement)" "$WORK/pl.pl$np.err" || fail "--placement on $np ranks: no report of the shares"
        awk -v a="$pl" -v b="$rr" 'BEGIN { exit !(a != "" && b != "" && a <= b + 0.05) }' \
            || fail "--placement on $np ranks: the busiest rank did $pl% of an exchange's rows, $rr% with round robin"
        echo "--placement on $np ranks: logits identical; the busiest rank's share per exchange $pl% (round robin $rr%)"
    done
else
    fail "run --usage-stats: $(tail -1 "$WORK/pl.1.err"), or no $WORK/pl.gguf.usage"
fi
printf 'colibri-usage 1\n3 5\n' >"$WORK/short.usage"
for bad in "$WORK/none.usage" "$WORK/short.usage" "$WORK/pl.gguf"; do
    if timeout 120 mpirun -np 2 --oversubscribe "$MPI" run -m "$WORK/pl.gguf" --tokens 1,2 -n 1 --placement "$bad" \
        >/dev/null 2>"$WORK/bad.err"; then
        fail "--placement $bad: ran"
    else
        grep -q "^colibri-mpi: --placement $bad" "$WORK/bad.err" || fail "--placement $bad: $(head -3 "$WORK/bad.err")"
    fi
done
printf 'colibri-usage 1\n3 5\n%s\n%s\n%s\n' "1 2 3 4 5" "1 2 3 4 5" "1 2 3 4 5" >"$WORK/other.usage"
if timeout 120 mpirun -np 2 --oversubscribe "$MPI" run -m "$WORK/pl.gguf" --tokens 1,2 -n 1 --placement "$WORK/other.usage" \
    >/dev/null 2>"$WORK/bad.err"; then
    fail "--placement for another model: ran"
else
    grep -q "holds counts for 3 layers x 5 experts; the model has" "$WORK/bad.err" \
        || fail "--placement for another model: $(head -3 "$WORK/bad.err")"
fi
finish expert_parallel
