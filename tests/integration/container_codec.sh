#!/bin/sh
# Issue 18, compressed and encrypted .colibri files (docs/FORMAT.md, version 2), through the CLI:
#   - the logits of compressed (zstd, zlib, with and without the byte split) and encrypted
#     (alone and with zstd) files are bit-identical to the plain file's, in the unbounded
#     mode and the bounded one (--mem-budget; a 2-expert pool with and without --direct-io);
#   - colibri encrypt, convert --decrypt back to a plain file byte-identical to the original;
#     convert of an encrypted source must say --encrypt or --decrypt;
#   - keys: wrong key, no key, a malformed key file, the key never on the command line;
#   - tampering: every position class of tests/reference/colibri_v2.py (header fields, salt,
#     key check, clear and sealed metadata, dense and expert chunks, tags, padding, swapped and
#     moved chunks, truncation), raw and with every CRC recomputed, through `run` (unbounded
#     and bounded) and `verify`: each fails with one clear line, and nothing is generated;
#   - verify: OK for good files (authenticated with the key, "as stored" without).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
V2="$PYTHON $REF/colibri_v2.py"
d="$FX/mixtral"
toks=$(csv "$(cat "$d/tokens.txt")")
KEY="$WORK/key"
rm -f "$KEY" "$WORK/key2"
"$COLIBRI" keygen "$KEY" 2>/dev/null || fail "keygen"
[ "$(stat -c %a "$KEY")" = 600 ] || fail "keygen: $KEY is not mode 0600"
"$COLIBRI" keygen "$KEY" 2>/dev/null && fail "keygen overwrote an existing key file"
"$COLIBRI" keygen "$WORK/key2" 2>/dev/null

colibri_convert "$d/hf" "$WORK/plain.colibri" --dtype q8_0 || exit 1
colibri_convert "$d/hf" "$WORK/f16.colibri" --dtype f16 || exit 1
colibri_convert "$WORK/plain.colibri" "$WORK/zstd.colibri" --compress zstd
colibri_convert "$WORK/plain.colibri" "$WORK/zlib.colibri" --compress zlib:9
colibri_convert "$WORK/plain.colibri" "$WORK/enc.colibri" --encrypt --key-file "$KEY"
colibri_convert "$WORK/plain.colibri" "$WORK/zenc.colibri" --compress zstd:5 --encrypt --key-file "$KEY"
colibri_convert "$WORK/f16.colibri" "$WORK/f16z.colibri" --compress zstd
# chunks of several segments (64 KiB; an expert is 208 KiB in q8_0, 384 KiB in f16): each
# segment its own nonce, decoded by several I/O threads into one pool slot
colibri_convert "$WORK/plain.colibri" "$WORK/enc64.colibri" --encrypt --segment-size 64K --key-file "$KEY"
colibri_convert "$WORK/f16.colibri" "$WORK/f16z64.colibri" --compress zstd --segment-size 64K --encrypt --key-file "$KEY"
expect_clean_error "segment-size" convert "$WORK/plain.colibri" -o "$WORK/x.colibri" --compress zstd --segment-size 100K
colibri_convert "$WORK/f16.colibri" "$WORK/f16zn.colibri" --compress zstd --byte-split off
colibri_convert "$WORK/f16.colibri" "$WORK/f16zenc.colibri" --compress zlib --encrypt --key-file "$KEY"
cmp -s "$WORK/f16z.colibri" "$WORK/f16zn.colibri" && fail "--byte-split off changed nothing on f16 weights"

# logits: every encoding and every mode against the plain file's unbounded run (the pool
# holds 2 experts: 208 KiB each in q8_0, 384 KiB in f16)
logits() { # OUT MODEL ARGS...
    _o=$1; _m=$2; shift 2
    "$COLIBRI" run --key-file "$KEY" -m "$_m" --tokens "$toks" -n 6 --threads 2 --dump-logits "$_o" "$@" \
        >"$_o.ids" 2>"$_o.err" || { fail "run $_m $*: $(tail -1 "$_o.err")"; return 1; }
}
for base in plain f16; do
    logits "$WORK/$base.ref" "$WORK/$base.colibri" || continue
    # (budgets that leave a pool of a few of the 32 experts once the dense weights, KV cache,
    # arena and an encoded file's decoder buffers are counted)
    case $base in plain) encs="zstd zlib enc zenc enc64"; pool=450K; budget=12M ;; *) encs="f16z f16zn f16zenc f16z64"; pool=800K; budget=16M ;; esac
    for e in $base $encs; do
        i=0
        for mode in "" "--mem-budget $budget" "--mem-budget $budget --direct-io" "--expert-pool $pool" "--expert-pool $pool --direct-io"; do
            i=$((i + 1))
            [ "$e" = "$base" ] && [ -z "$mode" ] && continue
            # shellcheck disable=SC2086
            logits "$WORK/$e.$i" "$WORK/$e.colibri" $mode || continue
            cmp -s "$WORK/$e.$i" "$WORK/$base.ref" || fail "$e ${mode:-unbounded}: logits differ from the plain file's"
            cmp -s "$WORK/$e.$i.ids" "$WORK/$base.ref.ids" || fail "$e ${mode:-unbounded}: tokens differ"
        done
        echo "$e: logits bit-identical to $base (unbounded, --mem-budget with and without --direct-io, 2-expert pool with and without --direct-io)"
    done
done

# every byte as docs/FORMAT.md describes it: an independent decoder written from the document
# (tests/reference/colibri_v2.py decode: HKDF, nonces, associated data, codecs, byte split)
# gives back the plain file's tensors, configuration and tokenizer
for e in zstd zlib enc zenc enc64; do check $V2 decode "$WORK/$e.colibri" "$WORK/plain.colibri" --key "$KEY"; done
for e in f16z f16zn f16zenc f16z64; do check $V2 decode "$WORK/$e.colibri" "$WORK/f16.colibri" --key "$KEY"; done
[ "$($V2 info "$WORK/enc64.colibri" | awk 'NR > 1 && $5 > 1' | wc -l)" -ge 16 ] ||
    fail "enc64.colibri: the experts are not in several segments"

# colibri encrypt; convert --decrypt gives the plain file back, byte for byte
"$COLIBRI" --key-file "$KEY" encrypt "$WORK/plain.colibri" "$WORK/enc2.colibri" 2>/dev/null || fail "colibri encrypt"
colibri_convert "$WORK/enc2.colibri" "$WORK/back.colibri" --decrypt --key-file "$KEY" &&
    { cmp -s "$WORK/back.colibri" "$WORK/plain.colibri" || fail "encrypt + decrypt did not give the plain file back"; }
colibri_convert "$WORK/zenc.colibri" "$WORK/back2.colibri" --decrypt --compress none --key-file "$KEY" &&
    { cmp -s "$WORK/back2.colibri" "$WORK/plain.colibri" || fail "zstd + encryption and back did not give the plain file"; }
cmp -s "$WORK/enc.colibri" "$WORK/enc2.colibri" && fail "two encryptions of one file are identical (salt not random?)"
expect_clean_error "--decrypt" convert "$WORK/enc.colibri" -o "$WORK/x.colibri" --key-file "$KEY"

# the tokenizer travels with every encoding (a clear compressed file once lost it on open)
want_ids=$("$COLIBRI" tokenize -m "$WORK/plain.colibri" --text "Hello there, colibri" 2>&1)
for e in zstd zlib enc zenc; do
    got_ids=$("$COLIBRI" --key-file "$KEY" tokenize -m "$WORK/$e.colibri" --text "Hello there, colibri" 2>&1)
    [ -n "$want_ids" ] && [ "$got_ids" = "$want_ids" ] || fail "$e.colibri tokenizes as '$got_ids', the plain file as '$want_ids'"
done

# keys
expect_clean_error "wrong key" run --key-file "$WORK/key2" -m "$WORK/enc.colibri" --tokens 1,2 -n 1
expect_clean_error "no key" run -m "$WORK/enc.colibri" --tokens 1,2 -n 1
COLIBRI_KEY_FILE="$KEY" "$COLIBRI" run -m "$WORK/enc.colibri" --tokens 1,2 -n 1 >/dev/null 2>&1 ||
    fail "COLIBRI_KEY_FILE is not used"
printf 'not a key' >"$WORK/badkey"
expect_clean_error "not a key" run --key-file "$WORK/badkey" -m "$WORK/enc.colibri" --tokens 1,2 -n 1
expect_clean_error "key file" run --key-file "$WORK/nonexistent" -m "$WORK/enc.colibri" --tokens 1,2 -n 1
grep -q "$(head -c 16 "$KEY")" "$WORK/ece.err" && fail "an error message shows key bytes"

# verify
for f in plain zstd zlib enc zenc enc64 f16z f16zenc f16z64; do
    "$COLIBRI" verify --key-file "$KEY" "$WORK/$f.colibri" >"$WORK/v.out" 2>&1 || fail "verify $f: $(cat "$WORK/v.out")"
done
"$COLIBRI" verify "$WORK/enc.colibri" 2>/dev/null | grep -q "as stored" || fail "verify without a key does not say what it checked"
"$COLIBRI" inspect "$WORK/enc.colibri" | grep -q "aes-256-gcm" || fail "inspect without a key shows nothing"
"$COLIBRI" inspect "$WORK/enc.colibri" | grep -q "blk.0" && fail "inspect without a key shows tensor names"

# tampering: every position class; for the encrypted files also with the CRCs an attacker
# would fix (a clear file has no defence against that: its CRCs are what it has). A case that
# breaks the file's structure fails at open whatever the mode; a chunk's bytes are also run
# in the bounded mode, where the expert is read (and authenticated) on demand.
n=0
for f in zenc zstd enc64; do
    variants="raw fix"
    [ "$f" = zstd ] && variants=raw
    for c in $($V2 cases "$WORK/$f.colibri"); do
        for v in $variants; do
            t="$WORK/t.colibri"
            fix=""
            [ "$v" = fix ] && fix=--fix-crc
            $V2 tamper "$WORK/$f.colibri" "$t" "$c" $fix 2>"$WORK/t.err" || { fail "tamper $c: $(cat "$WORK/t.err")"; continue; }
            n=$((n + 1))
            expect_clean_error "$t" run --key-file "$KEY" -m "$t" --tokens "$toks" -n 6 --threads 2 ||
                echo "  ($f $c $v, unbounded)"
            [ -s "$WORK/ece.out" ] && fail "$f $c $v: tokens were generated from a tampered file"
            case $c in dense-* | expert-* | tag-* | swap-* | move-*)
                expect_clean_error "$t" run --key-file "$KEY" -m "$t" --tokens "$toks" -n 6 --threads 2 \
                    --expert-pool 450K || echo "  ($f $c $v, bounded)" ;;
            esac
            expect_clean_error "$t" verify --key-file "$KEY" "$t" || echo "  ($f $c $v, verify)"
        done
    done
done
echo "tamper cases: $n files, each through run (unbounded, bounded) and verify"
[ "$n" -ge 60 ] || fail "only $n tamper cases ran"
finish container_codec
