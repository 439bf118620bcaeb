#!/bin/sh
# integration: alone (it measures time, page-cache residency or RSS: no other script beside it)
# A budgeted run keeps the page cache out of the way (docs/MEMORY.md, "Read path"): on a
# generated Mixtral-shaped q4_0 GGUF (tools/gen_mixtral_gguf.py --small, 30 MB, ~27 MiB of
# experts) evicted from the page cache first, `colibri run --mem-budget 28M` (a pool of 5
# experts, so every token reads experts: several times the file) must leave no more of the
# file in the page cache than its non-expert part (dense weights, metadata) plus 1 MiB,
# measured with mincore (bench/pagecache.py) — with the default read path and with
# `--direct-io dontneed` (pread + POSIX_FADV_DONTNEED, the path where O_DIRECT is refused).
# The same run with `--buffered-io` (the old default) must leave at least half the experts
# there: the check sees what it is meant to catch. Logits of every path are identical.
# The same holds for the model converted to zstd-compressed and to AES-256-GCM-encrypted
# .colibri files (container version 2), whose open reads around every chunk.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri

model="$WORK/mixtral-small-q4_0.gguf"
"$PYTHON" "$ROOT/tools/gen_mixtral_gguf.py" --small "$model" >/dev/null || { fail "gen_mixtral_gguf.py --small failed"; finish pagecache; }
pc() { "$PYTHON" "$ROOT/bench/pagecache.py" "$@"; }
size=$(wc -c <"$model")
# "routed experts 27.00 MiB" from colibri inspect, in bytes
expert=$("$COLIBRI" inspect "$model" | sed -n 's/.*routed experts \([0-9.]*\) MiB.*/\1/p' | awk '{printf "%d", $1 * 1048576}')
[ "${expert:-0}" -gt 0 ] || { fail "colibri inspect shows no expert bytes"; finish pagecache; }
limit=$((size - expert + 1048576))
echo "file $size bytes, experts $expert bytes: a budgeted run may leave at most $limit bytes cached"

pc --evict "$model"
if [ "$(pc --bytes "$model")" -gt $((size / 2)) ]; then
    # tmpfs and the like: the file's pages are its storage, nothing to measure
    echo "SKIP: $model stays in memory after POSIX_FADV_DONTNEED (tmpfs?): no page cache to measure"
    finish pagecache
fi

toks=1,5,9,33,70,2,11,95,40,41,100,200,300,400
colibri_run "$WORK/ref.ids" -m "$model" --tokens "$toks" -n 24 --threads 2 --dump-logits "$WORK/ref.logits"

# run NAME OPTS...: a cold budgeted run; prints the bytes of the file cached after it
run() {
    _n=$1; shift
    pc --evict "$model"
    _b=$(pc --bytes "$model")
    colibri_run "$WORK/$_n.ids" -m "$model" --tokens "$toks" -n 24 --threads 2 --mem-budget "${BUDGET:-28M}" \
        --dump-logits "$WORK/$_n.logits" "$@" || return 1
    _a=$(pc --bytes "$model")
    _line=$(grep 'expert pool' "$WORK/run.err")
    echo "$_n: cached before $_b, after $_a bytes; $_line"
    cmp -s "$WORK/ref.logits" "$WORK/$_n.logits" || fail "$_n: logits differ from the unbounded run"
    cmp -s "$WORK/ref.ids" "$WORK/$_n.ids" || fail "$_n: greedy ids differ from the unbounded run"
    # the run must have read experts from the file: more than the file's experts in all
    _read=$(echo "$_line" | sed -n 's/.* \([0-9.]*\) MiB read.*/\1/p' | awk '{printf "%d", $1 * 1048576}')
    [ "${_read:-0}" -gt "$expert" ] || fail "$_n: read ${_read:-?} bytes of experts, expected more than $expert"
    echo "$_a" >"$WORK/$_n.after"
    echo "$_line" >"$WORK/$_n.line"
}

for mode in default dontneed buffered; do
    case $mode in
    default) run default ;;
    dontneed) run dontneed --direct-io dontneed ;;
    buffered) run buffered --buffered-io ;;
    esac
done
for mode in default dontneed; do
    [ -f "$WORK/$mode.after" ] || continue
    a=$(cat "$WORK/$mode.after")
    [ "$a" -le "$limit" ] || fail "$mode: $a bytes of the file cached after the run, more than $limit (the experts' reads stayed in the page cache)"
done
grep -Eq 'reads: (O_DIRECT|pread \+ POSIX_FADV_DONTNEED)' "$WORK/default.line" 2>/dev/null ||
    fail "default budgeted run does not report an O_DIRECT or DONTNEED read path: $(cat "$WORK/default.line" 2>/dev/null)"
grep -q 'reads: pread + POSIX_FADV_DONTNEED' "$WORK/dontneed.line" 2>/dev/null ||
    fail "--direct-io dontneed does not report its read path: $(cat "$WORK/dontneed.line" 2>/dev/null)"
grep -q 'reads: buffered pread' "$WORK/buffered.line" 2>/dev/null ||
    fail "--buffered-io does not report its read path: $(cat "$WORK/buffered.line" 2>/dev/null)"
if [ -f "$WORK/buffered.after" ]; then
    a=$(cat "$WORK/buffered.after")
    [ "$a" -ge $((expert / 2)) ] ||
        fail "--buffered-io left only $a bytes cached (expected at least half the experts, $((expert / 2))): the measurement cannot tell the paths apart"
fi

# encoded containers: the default read path, same limit (the dense part is stored in about
# as many bytes: random q4_0 does not compress); the budget also holds the decoders' buffers
# (zstd's are larger), leaving a pool of about 6 experts
"$COLIBRI" keygen "$WORK/k.key" >/dev/null 2>&1 || fail "colibri keygen failed"
plain_model=$model
for enc in zstd aes; do
    model="$WORK/m-$enc.colibri"
    case $enc in
    zstd) "$COLIBRI" convert "$plain_model" -o "$model" --compress zstd >/dev/null 2>&1 ;;
    aes) "$COLIBRI" convert "$plain_model" -o "$model" --encrypt --key-file "$WORK/k.key" >/dev/null 2>&1 ;;
    esac || { fail "convert to $enc failed"; continue; }
    s2=$(wc -c <"$model")
    lim2=$((s2 - expert + 1048576))
    case $enc in zstd) BUDGET=43M ;; aes) BUDGET=36M ;; esac
    run "$enc" --key-file "$WORK/k.key" || { fail "$enc: budgeted run failed"; continue; }
    a=$(cat "$WORK/$enc.after")
    [ "$a" -le "$lim2" ] || fail "$enc: $a bytes of the file cached after the run, more than $lim2 (dense part + 1 MiB)"
done

finish pagecache
