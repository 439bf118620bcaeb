#!/bin/sh
# tools/gen_quant_fixtures.sh LLAMA_QUANTIZE — regenerates tests/fixtures/quant/ (README.md
# there says what it holds). Runs llama.cpp's own llama-quantize (path given; built outside
# the repository) on the f32 GGUF of each oracle fixture for every mix colibri convert
# writes, records every output's tensor types in types.json, and keeps the output files
# listed in KEEP below (a subset, to keep the repository small; each block format and each
# fallback path appears in at least one of them). Run from the repository root.
set -eu
Q=${1:?usage: $0 /path/to/llama-quantize}
PY=${PYTHON:-/usr/bin/python3}
OUT=tests/fixtures/quant
MODELS="mixtral qwen2moe olmoe llama-dense"
MIXES="Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS Q4_0 Q4_1 Q5_0 Q5_1 Q8_0"
KEEP="mixtral-Q2_K mixtral-Q3_K_M mixtral-Q4_K_S mixtral-Q5_K_M mixtral-IQ4_NL mixtral-IQ4_XS
      qwen2moe-Q4_K_M qwen2moe-Q3_K_L qwen2moe-IQ4_XS olmoe-Q4_K_M olmoe-Q2_K
      llama-dense-Q4_K_M llama-dense-Q3_K_M llama-dense-Q5_K_S llama-dense-IQ4_XS"
[ -x "$Q" ] || { echo "$Q is not executable" >&2; exit 2; }
[ -d tests/fixtures/mixtral ] || { echo "run from the repository root" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$OUT"
rm -f "$OUT/types.json" $(ls "$OUT"/*.gguf 2>/dev/null | grep -v -- -MXFP4.gguf) # the MXFP4 file is ik_llama.cpp's (README.md)
for m in $MODELS; do
    for t in $MIXES; do
        "$Q" "tests/fixtures/$m/model-f32.gguf" "$tmp/$m-$t.gguf" "$t" 2 >"$tmp/$m-$t.log" 2>&1 ||
            { echo "llama-quantize $m $t failed:" >&2; tail -5 "$tmp/$m-$t.log" >&2; exit 1; }
        "$PY" tests/reference/quant_fixtures.py record "$OUT/types.json" "$m" "$t" "$tmp/$m-$t.gguf"
    done
done
for k in $KEEP; do cp "$tmp/$k.gguf" "$OUT/$k.gguf"; done
(cd "$OUT" && md5sum ./*.gguf > MD5SUMS)
echo "wrote $OUT: $(ls "$OUT"/*.gguf | wc -l) GGUF files, types of $(echo $MODELS | wc -w) models x $(echo $MIXES | wc -w) mixes"
