#!/bin/sh
# bench/serve.sh — decode throughput through `colibri serve`:
#   1. single-stream decode tok/s through the server (streamed, from the first token to the
#      last) against `colibri bench` on the same model and threads;
#   2. aggregate decode tok/s with 1, 2, 4 and 8 concurrent streams, and the bytes of expert
#      weights a step reads (from /metrics: moe_expert_bytes_run_total / decode_steps_total),
#      the distinct experts per MoE layer and step, and "in decode": the share of the round's
#      wall time the scheduler spent inside colibri_decode (the rest is the server's own
#      work: draws, detokenizing, bookkeeping). On a shared machine the tok/s figures swing
#      with the load; that share does much less. "bound": the aggregate n streams could reach
#      against 1 stream if a step's time were its bytes (dense weights once + the experts it
#      ran); "of bound": the measured ratio against it.
# usage: bench/serve.sh MODEL COLIBRI [COLIBRI2 ...]
#   env: THREADS (2), TOKENS (128 per stream), STREAMS ("1 2 4 8"), EXTRA (more serve options),
#        PEER (a llama-server binary, llama.cpp's or ik_llama.cpp's: after the colibri binaries
#        it serves the same file with -np = the most streams and the same rounds are run; its
#        /metrics differ, so only tokens, wall time and tok/s are given), PEER_ARGS (e.g. -rtr: llama-server takes no value after it),
#        TEMP (1.0: each stream samples with its own seed, so that the streams' tokens, and the
#        experts they choose, differ; on a random-weight file greedy streams all fall into the
#        same tokens and share every expert), PAIRS (1: how many times `colibri bench` and a
#        single-stream round take turns before the table; the medians of both and their ratio
#        are printed — on a shared machine one pair swings by 10 % either way), ROUNDS (1: how
#        many times the rounds of all STREAMS take turns — 1, 4, 1, 4, ... — before the table,
#        which then gives each column's median over them, the bound from those medians)
# A round's wall time runs from its first token to its last, so it includes the steps that
# evaluate the other streams' prompts; the "steady window" table is the part of each round
# where every stream decodes (from every stream's first token to 2 tokens before the first
# stream's end; /metrics read at both ends, so its bytes per step are those steps' own),
# which is the decode step the bound describes.
# ignore_eos: every stream generates exactly TOKENS tokens.
set -eu
MODEL=$1; shift
THREADS=${THREADS:-2}; TOKENS=${TOKENS:-128}; PAIRS=${PAIRS:-1}; ROUNDS=${ROUNDS:-1}; export TEMP=${TEMP:-1.0}; STREAMS=${STREAMS:-"1 2 4 8"}; EXTRA=${EXTRA:-}
PY=${PYTHON:-python3}
MAXS=1; for s in $STREAMS; do [ "$s" -gt "$MAXS" ] && MAXS=$s; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# one round of N concurrent streams: prints "tokens wall_s tok_s steps bytes_per_step"
cat >"$tmp/round.py" <<'PY'
import http.client, json, os, sys, threading, time
port, n, tokens = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def metrics(): # colibri's counters; {} from a peer (its names differ)
    c = http.client.HTTPConnection("127.0.0.1", port); c.request("GET", "/metrics"); r = c.getresponse(); t = r.read().decode()
    if r.status != 200: return {}
    m = {}
    for l in t.splitlines():
        f = l.split()
        if len(f) == 2 and not l.startswith("#"):
            try: m[f[0]] = float(f[1])
            except ValueError: pass
    return m
res = [None] * n
# the steady window: from the moment every stream has its first token (all prompts evaluated)
# to the moment the first stream is 2 tokens from its end, every step decodes one token of
# each stream; /metrics at both ends gives that window's tokens, steps and bytes
cv = threading.Condition(); started = [0]; near_end = [False]
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    body = json.dumps({"prompt": "Stream %d: once upon a time" % i, "max_tokens": tokens, "temperature": float(os.environ["TEMP"]), "seed": 1000 + i,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse(); first = last = None; got = 0; chunks = 0; times = []
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]": continue
        j = json.loads(line[6:])
        if j.get("usage"): got = j["usage"]["completion_tokens"]; continue
        if j["choices"] and j["choices"][0].get("text"):
            now = time.perf_counter(); first = first or now; last = now; chunks += 1; times.append(now)
            with cv:
                if chunks == 1: started[0] += 1
                if chunks >= tokens - 2: near_end[0] = True
                cv.notify_all()
    with cv: near_end[0] = True; cv.notify_all() # a stream that ended early closes the window
    res[i] = (first, last, got or chunks, times) # a server without the usage chunk: one token per chunk
win = {}
def window():
    with cv: cv.wait_for(lambda: started[0] == n or near_end[0])
    if near_end[0]: return
    win["a"] = (time.perf_counter(), metrics())
    with cv: cv.wait_for(lambda: near_end[0])
    win["b"] = (time.perf_counter(), metrics())
m0 = metrics(); t0 = time.perf_counter()
th = [threading.Thread(target=one, args=(i,)) for i in range(n)] + [threading.Thread(target=window)]
[t.start() for t in th]; [t.join() for t in th]
t1 = time.perf_counter(); m1 = metrics()
first = min(r[0] for r in res); last = max(r[1] for r in res); toks = sum(r[2] for r in res)
d = lambda k, a=m0, b=m1: b.get(k, 0) - a.get(k, 0)
steps = d("colibri_decode_steps_total")
byts = d("colibri_moe_expert_bytes_run_total")
runs = d("colibri_moe_layer_runs_total")
exps = d("colibri_moe_experts_run_total")
busy = d("colibri_decode_busy_seconds_total")
# steady: tok/s, expert bytes per step, tokens per step (n when the window held every stream);
# without the counters (a peer) tok/s from the chunks that arrived in the window (one token
# each) and "-" for the rest; all "-" without a window
st = ["-", "-", "-"]
if "a" in win and "b" in win:
    (ta, ma), (tb, mb) = win["a"], win["b"]
    ws = d("colibri_decode_steps_total", ma, mb) if mb else 0
    if not mb:
        st[0] = "%.2f" % (sum(sum(1 for x in r[3] if ta <= x <= tb) for r in res) / (tb - ta))
    if ws > 0:
        st = ["%.2f" % (d("colibri_generated_tokens_total", ma, mb) / (tb - ta)), "%.0f" % (d("colibri_moe_expert_bytes_run_total", ma, mb) / ws),
              "%.2f" % (d("colibri_decode_batch_tokens_total", ma, mb) / ws)]
# the first token of each stream is sampled from the prompt's logits: decode = toks - n tokens
print("%d %.3f %.2f %d %.0f %.2f %.1f %s" % (toks, last - first, (toks - n) / (last - first), steps, byts / max(steps, 1),
                                             exps / max(runs, 1), 100 * busy / (t1 - t0), " ".join(st)))
PY
# ROUNDS times the rounds of every stream count in turn, into $tmp/rounds ("n fields...")
run_rounds() {
    : >"$tmp/rounds"
    for r in $(seq 1 "$ROUNDS"); do
        for n in $STREAMS; do echo "$n $($PY "$tmp/round.py" "$1" "$n" "$TOKENS")" >>"$tmp/rounds"; done
    done
}
# the median of each field over the rounds of n streams
round_medians() {
    $PY -c 'import statistics, sys
rows = [l.split()[1:] for l in open(sys.argv[1]) if l.split()[0] == sys.argv[2]]
def med(i):
    v = [float(r[i]) for r in rows if r[i] != "-"]
    return "%g" % statistics.median(v) if v else "-"
print(" ".join(med(i) for i in range(len(rows[0]))))' "$tmp/rounds" "$1"
}
# the dense bytes a step reads once (attention, norms, router, output head): from a GGUF
# header (bench/gguf_active.py), or DENSE_BYTES for other files; without it no bound is given
DENSE=${DENSE_BYTES:-}
case "$MODEL" in *.gguf) [ -n "$DENSE" ] || DENSE=$($PY "$(dirname "$0")/gguf_active.py" "$MODEL" --json 2>/dev/null | $PY -c 'import json,sys; print(json.load(sys.stdin)["dense_bytes"])' 2>/dev/null || true) ;; esac
for BIN in "$@"; do
    echo "== $BIN ($MODEL, $THREADS threads)"
    "$BIN" serve -m "$MODEL" --port 0 -t "$THREADS" --parallel "$MAXS" --max-seq-len $((TOKENS + 64)) $EXTRA 2>"$tmp/err" &
    sp=$!
    port=
    for i in $(seq 1 3000); do
        port=$(sed -n 's/.*serving .* on http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$tmp/err"); [ -n "$port" ] && break
        kill -0 $sp 2>/dev/null || break; sleep 0.1
    done
    [ -n "$port" ] || { cat "$tmp/err"; exit 1; }
    $PY "$tmp/round.py" "$port" 1 8 >/dev/null # warm-up
    # colibri bench (random ids at decode, so that routing varies as in sampled streams) and
    # one stream through the server, taking turns; the server idles while the bench runs
    : >"$tmp/pairs"
    for r in $(seq 1 "$PAIRS"); do
        # --reps 1: one run of TOKENS tokens, the mean over them, as the stream's round (its
        # default, the median of 3 runs, is one sample against three on a noisy machine)
        b=$("$BIN" bench -m "$MODEL" -t "$THREADS" -p 16 -n "$TOKENS" --reps 1 --random-decode --json 2>/dev/null |
            $PY -c 'import json,sys; print(json.load(sys.stdin)["decode_tok_s"])')
        set -- $($PY "$tmp/round.py" "$port" 1 "$TOKENS")
        echo "$b $3" >>"$tmp/pairs"
        echo "pair $r: colibri bench decode $b tok/s, one stream through the server $3 tok/s"
    done
    bt=$($PY -c 'import statistics,sys; print(statistics.median(float(l.split()[0]) for l in open(sys.argv[1])))' "$tmp/pairs")
    st=$($PY -c 'import statistics,sys; print(statistics.median(float(l.split()[1]) for l in open(sys.argv[1])))' "$tmp/pairs")
    echo "medians of $PAIRS: colibri bench $bt tok/s, one stream $st tok/s = $(awk -v a="$st" -v b="$bt" 'BEGIN{printf "%.1f", 100*a/b}')% of colibri bench"
    run_rounds "$port"
    printf '%8s %10s %10s %12s %8s %18s %14s %10s %8s %10s\n' streams tokens wall_s "decode tok/s" steps "expert MB/step" "experts/layer" "in decode" bound "of bound"
    a1=; e1=
    for n in $STREAMS; do
        set -- $(round_medians "$n")
        # the bandwidth bound of n streams against 1: a step reads the dense weights once plus
        # the experts it ran, so n tokens per step cost (D + E_n) / (D + E_1) single steps
        [ "$n" -eq 1 ] && { a1=$3; e1=$5; }
        bnd=-; of=-
        if [ -n "$DENSE" ] && [ -n "$a1" ]; then
            bnd=$(awk -v n="$n" -v d="$DENSE" -v e1="$e1" -v en="$5" 'BEGIN{printf "%.3f", n * (d + e1) / (d + en)}')
            of=$(awk -v a="$3" -v a1="$a1" -v b="$bnd" 'BEGIN{printf "%.1f%%", 100 * a / a1 / b}')
        fi
        printf '%8d %10.0f %10.3f %12.2f %8.0f %18.2f %14.2f %9.1f%% %8s %10s\n' "$n" "$1" "$2" "$3" "$4" "$(echo "$5" | awk '{print $1/1048576}')" "$6" "$7" "$bnd" "$of"
    done
    # the same rounds' steady windows (every stream decoding: no prompt step inside), the same
    # bound from the window's own expert bytes per step
    echo "steady window (from every stream's first token to 2 tokens before the first stream's end):"
    printf '%8s %12s %18s %12s %8s %10s\n' streams "decode tok/s" "expert MB/step" "tokens/step" bound "of bound"
    a1=; e1=
    for n in $STREAMS; do
        set -- $(round_medians "$n")
        shift 7
        [ "$1" = - ] && { printf '%8d %12s\n' "$n" "-"; continue; }
        [ "$n" -eq 1 ] && { a1=$1; e1=$2; }
        bnd=-; of=-
        if [ -n "$DENSE" ] && [ -n "$a1" ]; then
            bnd=$(awk -v n="$n" -v d="$DENSE" -v e1="$e1" -v en="$2" 'BEGIN{printf "%.3f", n * (d + e1) / (d + en)}')
            of=$(awk -v a="$1" -v a1="$a1" -v b="$bnd" 'BEGIN{printf "%.1f%%", 100 * a / a1 / b}')
        fi
        printf '%8d %12.2f %18.2f %12.2f %8s %10s\n' "$n" "$1" "$(echo "$2" | awk '{print $1/1048576}')" "$3" "$bnd" "$of"
    done
    # each round's share of its own bound (n streams against the 1-stream round just before
    # it): rounds a few seconds apart share the machine's load, so these move less than the
    # medians above when the load changes between rounds
    [ -n "$DENSE" ] && $PY -c 'import statistics, sys
d = float(sys.argv[2]); one = None; per = {}
for l in open(sys.argv[1]):
    f = l.split(); n = int(f[0]); a, e = f[8], f[9]
    if a == "-": continue
    if n == 1: one = (float(a), float(e)); continue
    if one: per.setdefault(n, []).append(100 * float(a) / one[0] / (n * (d + one[1]) / (d + float(e))))
for n in sorted(per):
    print("%d streams, steady, each round against the 1-stream round before it: %s %% of the bound (median %.1f %%)"
          % (n, ", ".join("%.1f" % v for v in per[n]), statistics.median(per[n])))' "$tmp/rounds" "$DENSE"
    kill -TERM $sp; wait $sp || true
done
if [ -n "${PEER:-}" ]; then
    echo "== $PEER ${PEER_ARGS:-} ($MODEL, $THREADS threads, -np $MAXS)"
    port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # shellcheck disable=SC2086
    "$PEER" -m "$MODEL" --host 127.0.0.1 --port "$port" -t "$THREADS" -np "$MAXS" -c $((MAXS * (TOKENS + 64))) ${PEER_ARGS:-} \
        >"$tmp/perr" 2>&1 &
    sp=$!
    for i in $(seq 1 3000); do
        curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
        kill -0 $sp 2>/dev/null || { tail -5 "$tmp/perr"; exit 1; }; sleep 0.1
    done
    $PY "$tmp/round.py" "$port" 1 8 >/dev/null # warm-up
    run_rounds "$port"
    printf '%8s %10s %10s %12s %20s\n' streams tokens wall_s "decode tok/s" "steady decode tok/s"
    for n in $STREAMS; do
        set -- $(round_medians "$n")
        printf '%8d %10.0f %10.3f %12.2f %20s\n' "$n" "$1" "$2" "$3" "$8"
    done
    kill -TERM $sp; wait $sp || true
fi
