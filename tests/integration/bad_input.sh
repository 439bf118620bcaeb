#!/bin/sh
# Bad input through the CLI: every case must exit non-zero with exactly one line on stderr
# ("colibri: ..."), never a crash, a sanitizer report or a hang.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
FX="$ROOT/tests/fixtures"

# expect_fail PATTERN CMD... : non-zero status (not a signal), one stderr line matching PATTERN
expect_fail() {
    pat=$1; shift
    timeout 60 "$COLIBRI" "$@" >"$WORK/out" 2>"$WORK/err"
    st=$?
    lines=$(wc -l <"$WORK/err")
    if [ "$st" -eq 0 ] || [ "$st" -ge 124 ]; then
        fail "colibri $* : status $st (want a clean error)"; sed 's/^/    /' "$WORK/err" | head -5; return
    fi
    if [ "$lines" -ne 1 ] || ! grep -q "^colibri: " "$WORK/err"; then
        fail "colibri $* : want one 'colibri: ...' line on stderr, got $lines:"; sed 's/^/    /' "$WORK/err" | head -5; return
    fi
    if ! grep -qi -- "$pat" "$WORK/err"; then
        fail "colibri $* : message does not mention '$pat': $(cat "$WORK/err")"; return
    fi
}

expect_fail "no such file" run -m /nonexistent/model.colibri --tokens 1
mkdir -p "$WORK/empty"
expect_fail "config.json" run -m "$WORK/empty" --tokens 1
expect_fail "config.json" convert "$WORK/empty" -o "$WORK/x.colibri"

# an unsupported architecture is named
cp -r "$FX/llama-dense/hf" "$WORK/foo"
sed -i 's/LlamaForCausalLM/FooBarForCausalLM/' "$WORK/foo/config.json"
expect_fail "FooBarForCausalLM" convert "$WORK/foo" -o "$WORK/foo.colibri"
# shapes that disagree with the config are named by tensor
cp -r "$FX/llama-dense/hf" "$WORK/shape"
sed -i 's/"intermediate_size": 256/"intermediate_size": 320/' "$WORK/shape/config.json"
expect_fail "ffn_gate.weight" convert "$WORK/shape" -o "$WORK/shape.colibri"
expect_fail "shape" run -m "$WORK/shape" --tokens 1
# wrong magic
head -c 4096 /dev/urandom >"$WORK/random.bin"
expect_fail "not a model file" run -m "$WORK/random.bin" --tokens 1
printf 'COLIBRX\0' >"$WORK/magic.colibri"; cat "$WORK/random.bin" >>"$WORK/magic.colibri"
expect_fail "not a model file" inspect "$WORK/magic.colibri"

# a good model to damage
colibri_convert "$FX/llama-dense/hf" "$WORK/good.colibri" --dtype q8_0 || exit 1
size=$(stat -c %s "$WORK/good.colibri")
meta_end=$("$PYTHON" -c "import struct,sys; h=open(sys.argv[1],'rb').read(48); print(struct.unpack('<Q',h[32:40])[0])" "$WORK/good.colibri")
echo "file $size bytes, data section at $meta_end"
case "$meta_end" in ''|*[!0-9]*) fail "cannot read the data offset"; exit 1 ;; esac
[ "$meta_end" -lt "$size" ] || { fail "data offset $meta_end beyond the file ($size)"; exit 1; }
# truncation: every length up to 300, then every 97th to past the metadata, then inside the data
n=0
for len in $(seq 0 300) $(seq 301 97 $((meta_end + 500))) $((size / 2)) $((size - 4096)) $((size - 1)); do
    head -c "$len" "$WORK/good.colibri" >"$WORK/trunc.colibri"
    "$COLIBRI" run -m "$WORK/trunc.colibri" --tokens 1 -n 1 >/dev/null 2>"$WORK/err"
    st=$?
    if [ "$st" -eq 0 ] || [ "$st" -ge 124 ] || [ "$(wc -l <"$WORK/err")" -ne 1 ]; then
        fail "truncated at $len: status $st"; sed 's/^/    /' "$WORK/err" | head -3
    fi
    n=$((n + 1))
done
echo "truncations checked: $n"
# flipped bytes: in the metadata (open fails), in a tensor (verify names it)
flip() { # file offset
    "$PYTHON" - "$1" "$2" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read()); b[off] ^= 0x5a; open(p, 'wb').write(b)
PY
}
cp "$WORK/good.colibri" "$WORK/flip.colibri"; flip "$WORK/flip.colibri" 200
expect_fail "crc" run -m "$WORK/flip.colibri" --tokens 1
# the tensor holding byte (data offset + 10), from the metadata's own index
victim=$("$PYTHON" - "$WORK/good.colibri" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
mo, = struct.unpack('<Q', b[16:24]); n, = struct.unpack('<Q', b[mo:mo + 8])
for t in json.loads(b[mo + 8:mo + 8 + n])['tensors']:
    if t['offset'] <= 10 < t['offset'] + t['size']: print(t['name'])
PY
)
cp "$WORK/good.colibri" "$WORK/flip.colibri"; flip "$WORK/flip.colibri" $((meta_end + 10))
expect_fail "tensor '$victim' is corrupt" verify "$WORK/flip.colibri"
cp "$WORK/good.colibri" "$WORK/flip.colibri"; flip "$WORK/flip.colibri" $((size - 3))
expect_fail "corrupt" verify "$WORK/flip.colibri"
"$COLIBRI" verify "$WORK/good.colibri" >/dev/null 2>&1 || fail "verify rejects the intact file"

# run-time errors
expect_fail "out of range" run -m "$WORK/good.colibri" --tokens 1,5,512
expect_fail "out of range" run -m "$WORK/good.colibri" --tokens 1,-3
expect_fail "max_seq_len" run -m "$WORK/good.colibri" --tokens 1,2,3,4,5,6,7,8,9 -n 1 --max-seq-len 8
# a full context is never an error mid-stream: it shifts (llama.cpp's context shift), or with
# --no-context-shift generation stops with a message and status 0
if "$COLIBRI" run -m "$WORK/good.colibri" --tokens 1,2,3,4,5 -n 20 --max-seq-len 8 >"$WORK/out" 2>"$WORK/err"; then
    [ "$(wc -w <"$WORK/out")" -eq 20 ] || fail "context shift: $(wc -w <"$WORK/out") ids, want 20"
else
    fail "context shift: status $? ($(cat "$WORK/err"))"
fi
if "$COLIBRI" run -m "$WORK/good.colibri" --tokens 1,2,3,4,5 -n 20 --max-seq-len 8 --no-context-shift >"$WORK/out" 2>"$WORK/err"; then
    [ "$(wc -w <"$WORK/out")" -eq 4 ] || fail "--no-context-shift: $(wc -w <"$WORK/out") ids, want 4"
    grep -q "context is full" "$WORK/err" || fail "--no-context-shift: no message: $(cat "$WORK/err")"
else
    fail "--no-context-shift: status $? ($(cat "$WORK/err"))"
fi
# bench --depth-state naming a file that is not this model's saved depth: an error, and the
# file is left as it was (it may be anything: a model named by mistake)
head -c 5000 /dev/urandom >"$WORK/notstate"
cp "$WORK/notstate" "$WORK/notstate.orig"
expect_fail "not a colibri state file" bench -m "$WORK/good.colibri" -p 0 -n 2 -d 4 --reps 1 --depth-state "$WORK/notstate"
cmp -s "$WORK/notstate" "$WORK/notstate.orig" || fail "bench --depth-state changed a file that was not a state"
cp "$WORK/good.colibri" "$WORK/model-copy.colibri"
expect_fail "not this model's saved depth" bench -m "$WORK/good.colibri" -p 0 -n 2 -d 4 --reps 1 --depth-state "$WORK/model-copy.colibri"
cmp -s "$WORK/model-copy.colibri" "$WORK/good.colibri" || fail "bench --depth-state overwrote a model file"
rm -f "$WORK/depth.state"
if "$COLIBRI" bench -m "$WORK/good.colibri" -p 0 -n 2 -d 4 --reps 1 --depth-state "$WORK/depth.state" >/dev/null 2>"$WORK/err" &&
    [ -s "$WORK/depth.state" ] &&
    "$COLIBRI" bench -m "$WORK/good.colibri" -p 0 -n 2 -d 4 --reps 1 --depth-state "$WORK/depth.state" >/dev/null 2>"$WORK/err"; then
    grep -q "loaded from" "$WORK/err" || fail "bench --depth-state: the saved depth was not loaded: $(cat "$WORK/err")"
    expect_fail "not this model's saved depth" bench -m "$WORK/good.colibri" -p 0 -n 2 -d 3 --reps 1 --depth-state "$WORK/depth.state"
else
    fail "bench --depth-state round trip: $(cat "$WORK/err")"
fi
# wrong arguments
expect_fail "unknown option" run -m "$WORK/good.colibri" --tokens 1 --frobnicate
expect_fail "not a count" run -m "$WORK/good.colibri" --tokens 1 -n abc
expect_fail "no model" run --tokens 1
expect_fail "not a list" run -m "$WORK/good.colibri" --tokens 1,x,3
expect_fail "needs a value" run -m "$WORK/good.colibri" --tokens
expect_fail "unknown command" frobnicate
expect_fail "dtype" convert "$FX/llama-dense/hf" -o "$WORK/x.colibri" --dtype q3_z
expect_fail "moe_top_k" run -m "$FX/mixtral/model-q8_0.gguf" --tokens 1 --moe-top-k 9

# hostile tokenizer files and token lists (issue 13): sizes are bounded by what the file holds,
# every id is checked before it is converted
tokjson() { # FILE VOCAB_JSON [NORMALIZER_JSON] [POST_JSON]
    cat >"$1" <<EOT
{"model": {"type": "BPE", "vocab": $2, "merges": []}, "added_tokens": [],
 "normalizer": ${3:-null}, "pre_tokenizer": null, "post_processor": ${4:-null}, "decoder": null}
EOT
}
tokjson "$WORK/hugeid.json" '{"a": 0, "b": 1073741823}'
expect_fail "2 x the 2 entries" tokenize --tokenizer "$WORK/hugeid.json" --text ab
tokjson "$WORK/bigid.json" '{"a": 0, "b": 100000000}'
expect_fail "ids must be integers in \[0, 1028)" tokenize --tokenizer "$WORK/bigid.json" --text ab
tokjson "$WORK/fracid.json" '{"a": 0, "b": 1.5}'
expect_fail "has id 1.5" tokenize --tokenizer "$WORK/fracid.json" --text ab
# 40 normalizers that each double the text
norms=$("$PYTHON" -c 'import json; print(json.dumps({"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 40}))')
tokjson "$WORK/grow.json" '{"a": 0}' "$norms"
expect_fail "limit for the chain is 16 x the text + 256" tokenize --tokenizer "$WORK/grow.json" --text aaaa
tokjson "$WORK/grow1.json" '{"a": 0}' '{"type": "Replace", "pattern": {"String": "a"}, "content": "'"$(printf 'a%.0s' $(seq 1 300))"'"}'
expect_fail "limit for one normalizer is 16 x its input + 256" tokenize --tokenizer "$WORK/grow1.json" --text a
# a negative id in the post-processor's special tokens is not the "sequence goes here" mark
post='{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "X", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {"X": {"id": "X", "ids": [-1], "tokens": ["X"]}}}'
tokjson "$WORK/negpost.json" '{"a": 0}' null "$post"
expect_fail 'post_processor token "X" has id -1' tokenize --tokenizer "$WORK/negpost.json" --text a --special
# a word that yields no token first (no <unk>, "z" unknown): no undefined behaviour (UBSan
# build: memcpy to a NULL cache)
tokjson "$WORK/notok.json" '{"a": 0, "b": 0, "c": 1}'
out=$("$COLIBRI" tokenize --tokenizer "$WORK/notok.json" --text "z" 2>&1) || fail "tokenize of a word with no token failed: $out"
[ -z "$out" ] || fail "tokenize of a word with no token printed '$out'"
# strings sharing one id all map to it, as in tokenizers ("z" is in no vocabulary: dropped)
out=$("$COLIBRI" tokenize --tokenizer "$WORK/notok.json" --text "abcz" 2>&1)
[ "$out" = "0 0 1" ] || fail "tokenize of strings sharing an id gave '$out' (tokenizers: 0 0 1)"
# ids given to --jsonl --decode are integers, or the line is refused
tokjson "$WORK/ok.json" '{"a": 0, "b": 1}'
for bad in '[0,"x",1]' '[0,2.7]' '[0,1e20]' '[0,-1e20]' '[null]' '{"a":1}'; do
    echo "$bad" | expect_fail "not" tokenize --tokenizer "$WORK/ok.json" --jsonl --decode
done
echo '[0,1,0]' | "$COLIBRI" tokenize --tokenizer "$WORK/ok.json" --jsonl --decode >"$WORK/out" 2>&1 || fail "--jsonl --decode of good ids"
grep -qx '"a b a"' "$WORK/out" || fail "--jsonl --decode [0,1,0] gave $(cat "$WORK/out") (no decoder: tokens joined by spaces)"

# hyper-parameters (issue 13, items 7, 11, 12): one validation of every value, whatever the
# source (HF config.json, GGUF, .colibri), before anything is computed
EDIT="$PYTHON $ROOT/tests/reference/model_edit.py"
hfcfg() { # DIR PYTHON-STATEMENT-ON-c
    rm -rf "$1"; cp -r "$FX/llama-dense/hf" "$1"
    "$PYTHON" - "$1/config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); exec(sys.argv[2]); open(sys.argv[1], 'w').write(json.dumps(c))
PY
}
hfcfg "$WORK/hp" 'c["rope_scaling"] = {"rope_type": "linear", "factor": 0}'
expect_fail "rope scaling factor 0 out of range" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'c["rope_scaling"] = {"rope_type": "yarn", "factor": 0}'
expect_fail "rope scaling factor 0 out of range" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'c["rope_scaling"] = {"rope_type": "linear", "factor": -1}'
expect_fail "rope scaling factor -1 out of range" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 0}'
expect_fail "original_max_position_embeddings 0 out of range" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'c["rope_scaling"] = {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4}'
expect_fail "low_freq_factor < high_freq_factor" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'pass'
sed -i 's/"rope_theta": *[0-9.e]*/"rope_theta": 1e400/' "$WORK/hp/config.json"
expect_fail "rope_theta is inf" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'c["max_position_embeddings"] = 2**31'
expect_fail "'max_position_embeddings' = 2147483648 is out of range" run -m "$WORK/hp" --tokens 1,2,3 -n 2
hfcfg "$WORK/hp" 'c["num_attention_heads"] = "4"'
expect_fail "'num_attention_heads' must be an integer, not a string" run -m "$WORK/hp" --tokens 1,2,3 -n 2
G="$FX/llama-dense/model-f32.gguf"
$EDIT gguf "$G" "$WORK/hp.gguf" llama.rope.scaling.type=str:linear llama.rope.scaling.factor=f32:0
expect_fail "rope scaling factor 0 out of range" run -m "$WORK/hp.gguf" --tokens 1,2,3 -n 2
$EDIT gguf "$G" "$WORK/hp.gguf" llama.rope.freq_base=f64:1e400
expect_fail "rope_theta is inf" run -m "$WORK/hp.gguf" --tokens 1,2,3 -n 2
$EDIT gguf "$G" "$WORK/hp.gguf" llama.context_length=u64:2147483648
expect_fail "'llama.context_length' = 2147483648 is out of range" run -m "$WORK/hp.gguf" --tokens 1,2,3 -n 2
$EDIT gguf "$G" "$WORK/hp.gguf" llama.expert_count=str:8
expect_fail "'llama.expert_count' has the wrong type" run -m "$WORK/hp.gguf" --tokens 1,2,3 -n 2
# a GGUF tokenizer with fewer tokens than output rows is refused at load, not mid-generation
$EDIT gguf-tokens "$G" "$WORK/hp.gguf" 100
expect_fail "the tokenizer has 100 tokens (tokenizer.ggml.tokens), fewer than the model's 512" \
    run -m "$WORK/hp.gguf" -p hello -n 4
$EDIT colibri "$WORK/good.colibri" "$WORK/hp.colibri" embd_mult=1e39
expect_fail "embedding multiplier is inf" run -m "$WORK/hp.colibri" --tokens 1,2,3 -n 2
$EDIT colibri "$WORK/good.colibri" "$WORK/hp.colibri" embd_mult=1e30
expect_fail "embedding multiplier 1e+30 out of range" run -m "$WORK/hp.colibri" --tokens 1,2,3 -n 2
$EDIT colibri "$WORK/good.colibri" "$WORK/hp.colibri" rope_scaling=1 rope_factor=0
expect_fail "rope scaling factor 0 out of range" run -m "$WORK/hp.colibri" --tokens 1,2,3 -n 2
$EDIT colibri "$WORK/good.colibri" "$WORK/hp.colibri" 'n_expert="8"'
expect_fail "'n_expert' must be a number, not a string" run -m "$WORK/hp.colibri" --tokens 1,2,3 -n 2
$EDIT colibri "$WORK/good.colibri" "$WORK/hp.colibri"
"$COLIBRI" run -m "$WORK/hp.colibri" --tokens 1,2,3 -n 2 >/dev/null 2>&1 || fail "an unedited rewrite of good.colibri fails"

# a NaN at run time is an error naming the layer where it first appeared, not token 0
$EDIT gguf-nan "$G" "$WORK/nan.gguf" blk.1.ffn_down.weight
expect_fail "a NaN or infinity appeared in layer 1 (FFN)" run -m "$WORK/nan.gguf" --tokens 1,2,3 -n 3
$EDIT gguf-nan "$G" "$WORK/nan.gguf" blk.0.attn_q.weight
expect_fail "a NaN or infinity appeared in layer 0 (attention)" run -m "$WORK/nan.gguf" -p hello -n 3

# chat templates (items 3, 5, 6): an empty rendering, undefined behaviour in the evaluator,
# a rendering far beyond the context
chattpl() { # DIR TEMPLATE
    rm -rf "$1"; cp -r "$FX/llama-dense/hf" "$1"
    "$PYTHON" - "$1/tokenizer_config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["chat_template"] = sys.argv[2]; c["add_bos_token"] = False
open(sys.argv[1], "w").write(json.dumps(c))
PY
}
chattpl "$WORK/tpl" "{{ '' }}"
echo hi | expect_fail "the chat template rendered an empty prompt" chat -m "$WORK/tpl" -n 2
chattpl "$WORK/tpl" "{{ (-9223372036854775807 - 1) | abs }}"
echo hi | expect_fail "integer overflow in abs()" chat -m "$WORK/tpl" -n 2
chattpl "$WORK/tpl" "{{ 5 % 0 }}"
echo hi | expect_fail "modulo by zero" chat -m "$WORK/tpl" -n 2
chattpl "$WORK/tpl" "{% for i in range(1000000) %}{{ 'a b c d e f g h i j k l m n o p q r s t u v w x y z ' }}{% endfor %}"
echo hi | expect_fail "the rendered conversation (52000000 bytes) cannot fit the context of 256 tokens" \
    chat -m "$WORK/tpl" -n 2 --max-seq-len 256

# --dump-logits FILE writes the file or fails (item 8), with -p as with --tokens
rm -f "$WORK/dump.bin"
"$COLIBRI" run -m "$G" -p hello -n 2 --dump-logits "$WORK/dump.bin" >/dev/null 2>"$WORK/err" || fail "run -p --dump-logits: $(cat "$WORK/err")"
n_tok=$("$COLIBRI" tokenize -m "$G" --text hello --special 2>/dev/null | wc -w) # with BOS, as run -p
[ "$(stat -c %s "$WORK/dump.bin" 2>/dev/null)" = "$((n_tok * 512 * 4))" ] ||
    fail "run -p --dump-logits wrote $(stat -c %s "$WORK/dump.bin" 2>&1) bytes, want $n_tok x 512 floats"
expect_fail "--dump-logits $WORK/no/dir/d.bin: No such file or directory" run -m "$G" -p hello -n 2 --dump-logits "$WORK/no/dir/d.bin"
expect_fail "--dump-logits $WORK/no/dir/d.bin: No such file or directory" run -m "$G" --tokens 1,2 -n 2 --dump-logits "$WORK/no/dir/d.bin"
expect_fail "--dump-logits /dev/full: No space left on device" run -m "$G" --tokens 1,2 -n 2 --dump-logits /dev/full

# bench measures only what fits the model's context, as run refuses a longer prompt (item 9)
$EDIT gguf "$G" "$WORK/ctx256.gguf" llama.context_length=u32:256
expect_fail "304 tokens do not fit the model's context (256 positions)" bench -m "$WORK/ctx256.gguf" -p 300 -n 4
expect_fail "-p 100000 + -n 64 = 100064 tokens do not fit" bench -m "$WORK/ctx256.gguf" -p 100000 -n 64
expect_fail "--parallel: '0' is not in 1..256" bench -m "$WORK/ctx256.gguf" --parallel 0

# found by the fuzzers (issue 13): a config number beyond int (UBSan: float-cast overflow),
# decoding no ids (UBSan: pointer arithmetic on NULL)
printf '{"threads": 1e20}' >"$WORK/huge.json"
expect_fail "'threads' = 1e+20 is out of range" run -m "$G" --tokens 1 --config "$WORK/huge.json"
printf '{"io_threads": -1e300}' >"$WORK/huge.json"
expect_fail "'io_threads' must be an integer in 0..64" run -m "$G" --tokens 1 --config "$WORK/huge.json"
out=$(echo '[]' | "$COLIBRI" tokenize --tokenizer "$WORK/ok.json" --jsonl --decode 2>&1)
[ "$out" = '""' ] || fail "--jsonl --decode [] gave '$out'"

[ "$FAILS" -eq 0 ] && echo "bad_input: all cases failed cleanly"
[ "$FAILS" -eq 0 ]
