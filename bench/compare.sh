#!/bin/sh
# compare.sh — colibri vs llama.cpp-family peers on the same GGUF file, same thread count.
#
#   bench/compare.sh MODEL.gguf --peer PATH/llama-bench [--peer-args 'ARGS'] [--peer PATH2 ...]
#                    [--threads 2] [--reps 5] [--rounds 1] [--colibri build/x86_64/colibri]
#                    [--pp 128,512] [--tg 64] [--depth 4096,16384] [--ctk T] [--ctv T]
#                    [--colibri-args 'ARGS'] [--stream-mib 1024] [--no-stream] [--out DIR]
#
# Measures, per engine: prefill of each --pp length (pp<P>), decode of --tg tokens from an
# empty cache (tg<N>) and, for each --depth D, decode of --tg tokens with D tokens already
# in the KV cache (tg<N>@d<D>), --reps times:
#   colibri bench -m MODEL -p P -n 0 ...            (one run per prefill length)
#   colibri bench -m MODEL -p 0 -n N [-d D] --random-decode ...
#   llama-bench   -m MODEL -p P,... -n N [-d D | -gp D,N] -r R -o json
# (a peer's llama-bench that has -d takes depths with it; ik_llama.cpp's has -gp D,N, decode
# after a D-token prompt). --ctk / --ctv set the KV cache types of every engine (colibri
# -ctk/-ctv, llama-bench -ctk/-ctv); --colibri-args and --peer-args add options to colibri or
# to the peer named just before (e.g. '-rtr 1', '-fa 0'); a peer's name in the table then
# carries them. Decode pseudo-random ids everywhere (routing varies from token to token).
# Also the STREAM-like probe (bench/stream, read bandwidth with T threads). With --rounds N
# the whole sequence runs N times, engines taking turns, so that a slow spell of a shared
# machine falls on all of them; medians are over all rounds. Prints a table of medians,
# ratios colibri/peer, and each engine's achieved decode bandwidth at depth 0 (active bytes
# per token, bench/gguf_active.py, x tokens/s) next to the measured bandwidth.
# Engines run one after the other (never concurrently); raw outputs are kept in --out.
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
pp="128,512"
tg=64
depths=""
ctk=""
ctv=""
cargs=""
while [ $# -gt 0 ]; do
    case "$1" in
    --peer) n_peer=$((n_peer + 1)); peers="$peers $n_peer"; eval "peer_path_$n_peer=\$2"; eval "peer_args_$n_peer=''"; shift 2 ;;
    --peer-args) [ "$n_peer" -gt 0 ] || { echo "compare.sh: --peer-args before any --peer" >&2; exit 2; }
                 eval "peer_args_$n_peer=\$2"; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --colibri) colibri=$2; shift 2 ;;
    --colibri-args) cargs=$2; shift 2 ;;
    --pp) pp=$2; shift 2 ;;
    --tg) tg=$2; shift 2 ;;
    --depth) depths=$(echo "$2" | tr ',' ' '); shift 2 ;;
    --ctk) ctk=$2; shift 2 ;;
    --ctv) ctv=$2; shift 2 ;;
    --stream-mib) stream_mib=$2; shift 2 ;;
    --no-stream) do_stream=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    -*) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$model" ] || { echo "compare.sh: one model only" >&2; exit 2; }; model=$1; shift ;;
    esac
done
[ -n "$model" ] && [ -f "$model" ] || { echo "compare.sh: model file missing (see --help)" >&2; exit 2; }
[ -x "$colibri" ] || { echo "compare.sh: $colibri not built (make -j2)" >&2; exit 2; }
[ -n "$out" ] || out=$(mktemp -d /tmp/colibri-compare.XXXXXX)
mkdir -p "$out"
kvc=""   # cache types, colibri's and llama-bench's options have the same names
[ -z "$ctk" ] || kvc="$kvc -ctk $ctk"
[ -z "$ctv" ] || kvc="$kvc -ctv $ctv"
echo "$pp" > "$out/pp.txt"; echo "$tg" > "$out/tg.txt"; echo "$depths" > "$out/depths.txt"
echo "${ctk:-default}/${ctv:-default}" > "$out/kv.txt"

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
    # shellcheck disable=SC2086 # kvc, cargs: several options
    for p in $(echo "$pp" | tr ',' ' '); do
        echo "round $r/$rounds colibri: prefill $p, $reps reps" >&2
        "$colibri" bench -m "$model" -p "$p" -n 0 --threads "$threads" --reps "$reps" $kvc $cargs --json \
            > "$out/colibri-p$p-r$r.json" 2> "$out/colibri-p$p-r$r.err" || echo '{"failed":true}' > "$out/colibri-p$p-r$r.json"
    done
    for d in 0 $depths; do
        echo "round $r/$rounds colibri: decode $tg at depth $d, $reps reps" >&2
        # shellcheck disable=SC2086
        "$colibri" bench -m "$model" -p 0 -d "$d" -n "$tg" --threads "$threads" --reps "$reps" --random-decode \
            $kvc $cargs --json > "$out/colibri-d$d-r$r.json" 2> "$out/colibri-d$d-r$r.err" \
            || echo '{"failed":true}' > "$out/colibri-d$d-r$r.json"
    done
    i=0
    for k in $peers; do
        i=$((i + 1))
        eval "peer=\$peer_path_$k; pargs=\$peer_args_$k"
        echo "$peer" > "$out/peer$i.path"
        echo "$pargs" > "$out/peer$i.args"
        echo "round $r/$rounds peer $i ($peer $pargs): prefill $pp, decode $tg, $reps reps" >&2
        # shellcheck disable=SC2086 # pargs, kvc: several options
        "$peer" -m "$model" -p "$pp" -n "$tg" -t "$threads" -r "$reps" $kvc $pargs -o json \
            > "$out/peer$i-r$r.json" 2> "$out/peer$i-r$r.err" || echo '[]' > "$out/peer$i-r$r.json"
        for d in $depths; do
            if "$peer" --help 2>&1 | grep -q -- "--n-depth"; then dflag="-p 0 -n $tg -d $d"; else dflag="-p 0 -n 0 -gp $d,$tg"; fi
            echo "round $r/$rounds peer $i: decode $tg at depth $d ($dflag)" >&2
            # shellcheck disable=SC2086
            "$peer" -m "$model" $dflag -t "$threads" -r "$reps" $kvc $pargs -o json \
                > "$out/peer$i-d$d-r$r.json" 2> "$out/peer$i-d$d-r$r.err" || echo '[]' > "$out/peer$i-d$d-r$r.json"
        done
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
rd = lambda n: open(os.path.join(out, n)).read().split()
pps = [int(x) for x in rd("pp.txt")[0].split(",") if x]
tg = int(rd("tg.txt")[0])
depths = [int(x) for x in rd("depths.txt")]
act = load("active.json", {})
active = act.get("active_bytes_per_token", 0)
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None
R = range(1, rounds + 1)
bw = med([x["gb_s"] for r in R for x in load("stream-r%d.json" % r, {}).get("results", [])
          if x["threads"] == threads]) or 0
cols = ["pp%d" % p for p in pps] + ["tg%d" % tg] + ["tg%d@d%d" % (tg, d) for d in depths]
rows = {}
c = {}
for p in pps:
    c["pp%d" % p] = med([load("colibri-p%d-r%d.json" % (p, r), {}).get("prefill_tok_s") for r in R])
for d in [0] + depths:
    key = "tg%d" % tg if d == 0 else "tg%d@d%d" % (tg, d)
    c[key] = med([load("colibri-d%d-r%d.json" % (d, r), {}).get("decode_tok_s") for r in R])
c["sched_us"] = med([load("colibri-d0-r%d.json" % r, {}).get("sched_us_per_moe_layer_p50") for r in R])
c["kv_bytes_per_token"] = load("colibri-d0-r1.json", {}).get("kv_bytes_per_token")
rows["colibri"] = c
def peer_samples(entries, s, depth):
    for t in entries:
        ts = t.get("samples_ts") or [t.get("avg_ts")]
        np_, ng, nd = t.get("n_prompt", 0), t.get("n_gen", 0), t.get("n_depth", 0)
        if depth == 0 and ng == 0 and np_ in pps and not nd:
            s["pp%d" % np_] += ts
        elif depth == 0 and np_ == 0 and ng == tg and not nd:
            s["tg%d" % tg] += ts
        elif depth and ng == tg and (nd == depth or np_ == depth):  # llama-bench -d, or ik's -gp D,N
            s["tg%d@d%d" % (tg, depth)] += ts
for i in range(1, n_peers + 1):
    path = open(os.path.join(out, "peer%d.path" % i)).read().strip()
    name = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(path)))) or "peer%d" % i
    try:
        pargs = open(os.path.join(out, "peer%d.args" % i)).read().strip()
    except OSError:
        pargs = ""
    if pargs:
        name += " " + pargs
    s = {k: [] for k in cols}
    for r in R:
        peer_samples(load("peer%d-r%d.json" % (i, r), []), s, 0)
        for d in depths:
            peer_samples(load("peer%d-d%d-r%d.json" % (i, d, r), []), s, d)
    while name in rows:
        name += "'"
    rows[name] = {k: med(v) for k, v in s.items()}
def f(v):
    return "fails" if v is None else "%.2f" % v
print("model: %s (%s, %d experts, top-%d; %.2f GiB of tensors; %.1f MiB active per token)" % (
    act.get("model"), act.get("arch"), act.get("n_expert", 0), act.get("n_expert_used", 0),
    act.get("file_tensor_bytes", 0) / 2**30, active / 2**20))
print("threads %d, %d round(s), KV cache %s; measured read bandwidth %.1f GB/s (bench/stream, %d threads)" % (
    threads, rounds, rd("kv.txt")[0], bw, threads))
if c.get("sched_us") is not None:
    print("colibri scheduler: %.1f us per MoE layer at decode (median); KV cache %s bytes per token" % (
        c["sched_us"], c.get("kv_bytes_per_token")))
t0 = "tg%d" % tg
print(("%-24s" + " %12s" * (len(cols) + 2)) % tuple(["engine"] + [k + " t/s" for k in cols] + ["decode GB/s", "of bw"]))
for name, r in rows.items():
    gbs = r[t0] * active / 1e9 if r.get(t0) else None
    print(("%-24s" + " %12s" * (len(cols) + 2)) % tuple([name] + [f(r.get(k)) for k in cols] +
          [f(gbs), "%.0f%%" % (100 * gbs / bw) if gbs and bw else "-"]))
for d in depths:
    k = "tg%d@d%d" % (tg, d)
    for name, r in rows.items():
        if r.get(k) and r.get(t0):
            print("%-24s decode at depth %d: %.0f%% of depth 0" % (name, d, 100 * r[k] / r[t0]))
for name, r in rows.items():
    if name == "colibri":
        continue
    ratio = lambda k: "%.2fx" % (c[k] / r[k]) if c.get(k) and r.get(k) else "-"
    print("colibri / %-22s %s" % (name, "  ".join("%s %s" % (k, ratio(k)) for k in cols)))
json.dump({"model": act.get("model"), "threads": threads, "bandwidth_gb_s": bw, "active_bytes": active,
           "kv": rd("kv.txt")[0], "engines": rows}, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("raw results: %s" % out)
PYEOF
