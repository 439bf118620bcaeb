#!/bin/sh
# compare.sh — colibri vs llama.cpp-family peers on the same GGUF file, same thread count.
#
#   bench/compare.sh MODEL.gguf --peer PATH/llama-bench [--peer-args 'ARGS'] [--peer PATH2 ...]
#                    [--threads 2] [--reps 5] [--rounds 1] [--colibri build/x86_64/colibri]
#                    [--stream-mib 1024] [--no-stream] [--out DIR]
#
# Runs, per engine: prefill of 128 and 512 tokens and decode of 64 tokens, --reps times:
#   colibri bench -m MODEL -p 128 -n 64 --threads T --reps R --random-decode --json  (and -p 512)
#   llama-bench   -m MODEL -p 128,512 -n 64 -t T -r R -o json
# (both decode pseudo-random token ids, so routing varies from token to token), and the
# STREAM-like probe (bench/stream, read bandwidth with T threads). With --rounds N the
# whole sequence runs N times, engines taking turns, so that a slow spell of a shared
# machine falls on all of them; medians are over all rounds. Prints a table of medians,
# ratios colibri/peer, and each engine's achieved decode bandwidth:
#   active bytes per token (bench/gguf_active.py: dense tensors + k/n_expert of the expert
#   tensors) x decode tokens/s, next to the measured bandwidth.
# Engines run one after the other (never concurrently); raw outputs are kept in --out.
# --peer-args gives the peer named just before it extra llama-bench options, e.g. '-rtr 1'
# (ik_llama.cpp's run-time repacking); its name in the table then carries them.
# A peer whose llama.cpp does not know the file's architecture is reported as "fails".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
model=""
peers=""
n_peer=0
threads=2
reps=5
rounds=1
colibri="$top/build/x86_64/colibri"
stream_mib=1024
do_stream=1
out=""
while [ $# -gt 0 ]; do
    case "$1" in
    --peer) n_peer=$((n_peer + 1)); peers="$peers $n_peer"; eval "peer_path_$n_peer=\$2"; eval "peer_args_$n_peer=''"; shift 2 ;;
    --peer-args) [ "$n_peer" -gt 0 ] || { echo "compare.sh: --peer-args before any --peer" >&2; exit 2; }
                 eval "peer_args_$n_peer=\$2"; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --colibri) colibri=$2; shift 2 ;;
    --stream-mib) stream_mib=$2; shift 2 ;;
    --no-stream) do_stream=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$model" ] || { echo "compare.sh: one model only" >&2; exit 2; }; model=$1; shift ;;
    esac
done
[ -n "$model" ] && [ -f "$model" ] || { echo "compare.sh: model file missing (see --help)" >&2; exit 2; }
[ -x "$colibri" ] || { echo "compare.sh: $colibri not built (make -j2)" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/colibri-compare.XXXXXX)
mkdir -p "$out"

"$PY" "$here/gguf_active.py" "$model" --json > "$out/active.json"

[ "$do_stream" = 0 ] || make -s -C "$here" build/stream >/dev/null
r=0
while [ $r -lt "$rounds" ]; do
    r=$((r + 1))
    if [ "$do_stream" = 1 ]; then
        "$here/build/stream" --mib "$stream_mib" --threads "$threads" --reps 5 --json > "$out/stream-r$r.json"
    else
        echo '{"results":[]}' > "$out/stream-r$r.json"
    fi
    for p in 128 512; do
        echo "round $r/$rounds colibri: prefill $p, decode 64, $reps reps" >&2
        "$colibri" bench -m "$model" -p $p -n 64 --threads "$threads" --reps "$reps" --random-decode --json \
            > "$out/colibri-p$p-r$r.json" 2> "$out/colibri-p$p-r$r.err" || echo '{"failed":true}' > "$out/colibri-p$p-r$r.json"
    done
    i=0
    for k in $peers; do
        i=$((i + 1))
        eval "peer=\$peer_path_$k; pargs=\$peer_args_$k"
        echo "round $r/$rounds peer $i ($peer $pargs): prefill 128,512, decode 64, $reps reps" >&2
        echo "$peer" > "$out/peer$i.path"
        echo "$pargs" > "$out/peer$i.args"
        # shellcheck disable=SC2086 # pargs: several options
        "$peer" -m "$model" -p 128,512 -n 64 -t "$threads" -r "$reps" $pargs -o json \
            > "$out/peer$i-r$r.json" 2> "$out/peer$i-r$r.err" || echo '[]' > "$out/peer$i-r$r.json"
    done
done

"$PY" - "$out" "$i" "$threads" "$rounds" <<'PYEOF'
import json, os, statistics, sys
out, n_peers, threads, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def load(name, default):
    try:
        with open(os.path.join(out, name)) as f:
            txt = f.read().strip()
        return json.loads(txt) if txt else default
    except (OSError, ValueError):
        return default
act = load("active.json", {})
active = act.get("active_bytes_per_token", 0)
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
R = range(1, rounds + 1)
bw = med([x["gb_s"] for r in R for x in load("stream-r%d.json" % r, {}).get("results", [])
          if x["threads"] == threads]) or 0
rows = {}
c128 = [load("colibri-p128-r%d.json" % r, {}) for r in R]
c512 = [load("colibri-p512-r%d.json" % r, {}) for r in R]
rows["colibri"] = {"pp128": med([d.get("prefill_tok_s") for d in c128]),
                   "pp512": med([d.get("prefill_tok_s") for d in c512]),
                   "tg64": med([d.get("decode_tok_s") for d in c128 + c512]),
                   "sched_us": med([d.get("sched_us_per_moe_layer_p50") for d in c128 + c512])}
for i in range(1, n_peers + 1):
    path = open(os.path.join(out, "peer%d.path" % i)).read().strip()
    name = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(path)))) or "peer%d" % i
    try:
        pargs = open(os.path.join(out, "peer%d.args" % i)).read().strip()
    except OSError:
        pargs = ""
    if pargs:
        name += " " + pargs
    s = {"pp128": [], "pp512": [], "tg64": []}
    for r in R:
        for t in load("peer%d-r%d.json" % (i, r), []):
            ts = t.get("samples_ts") or [t.get("avg_ts")]
            if t.get("n_gen", 0) == 0 and t.get("n_prompt") in (128, 512):
                s["pp%d" % t["n_prompt"]] += ts
            elif t.get("n_prompt", 0) == 0 and t.get("n_gen") == 64:
                s["tg64"] += ts
    while name in rows:
        name += "'"
    rows[name] = {k: med(v) for k, v in s.items()}
def f(v):
    return "fails" if v is None else "%.2f" % v
print("model: %s (%s, %d experts, top-%d; %.2f GiB of tensors; %.1f MiB active per token)" % (
    act.get("model"), act.get("arch"), act.get("n_expert", 0), act.get("n_expert_used", 0),
    act.get("file_tensor_bytes", 0) / 2**30, active / 2**20))
print("threads %d, %d round(s); measured read bandwidth %.1f GB/s (bench/stream, %d threads)" % (
    threads, rounds, bw, threads))
if rows["colibri"].get("sched_us") is not None:
    print("colibri scheduler: %.1f us per MoE layer at decode (median)" % rows["colibri"]["sched_us"])
print("%-22s %10s %10s %10s %12s %8s" % ("engine", "pp128 t/s", "pp512 t/s", "tg64 t/s", "decode GB/s", "of bw"))
for name, r in rows.items():
    gbs = r["tg64"] * active / 1e9 if r["tg64"] else None
    print("%-22s %10s %10s %10s %12s %8s" % (name, f(r["pp128"]), f(r["pp512"]), f(r["tg64"]), f(gbs),
          "%.0f%%" % (100 * gbs / bw) if gbs and bw else "-"))
col = rows["colibri"]
for name, r in rows.items():
    if name == "colibri":
        continue
    ratio = lambda k: "%.2fx" % (col[k] / r[k]) if col[k] and r[k] else "-"
    print("colibri / %-20s pp128 %s  pp512 %s  tg64 %s" % (name, ratio("pp128"), ratio("pp512"), ratio("tg64")))
json.dump({"model": act.get("model"), "threads": threads, "bandwidth_gb_s": bw, "active_bytes": active,
           "engines": rows}, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("raw results: %s" % out)
PYEOF
