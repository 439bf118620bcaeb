# Shared helpers for tests/integration/*.sh (sourced, not run; it lives here so that
# tests/run_integration.sh does not pick it up as a test).
# Expects ROOT to be set by the caller. Provides PYTHON, REF, FX, WORK and:
#   need_colibri                 fail clearly when $COLIBRI is missing
#   csv "1 2 3"                  -> 1,2,3
#   colibri_convert SRC OUT ARGS... / colibri_run OUTVAR ARGS...  (echo the command,
#                                show stderr and fail the test when the CLI fails)
#   fail MSG / check CMD...      record a failure (the test continues, exits 1 at the end)
PYTHON=${PYTHON:-/usr/bin/python3}
# the f32 KV cache: what comparisons against float32 references (llama.cpp's f32-cache
# fixtures, hf_ref.py) must run with (the default cache type is f16)
F32KV="--cache-type-k f32 --cache-type-v f32"
REF="$ROOT/tests/reference"
FX="$ROOT/tests/fixtures"
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/colibri-it.XXXXXX")}
mkdir -p "$WORK"
FAILS=0

fail() {
    echo "FAIL: $*"
    FAILS=$((FAILS + 1))
}

check() {
    "$@" || FAILS=$((FAILS + 1))
}

need_colibri() {
    if [ -z "${COLIBRI:-}" ]; then
        echo "FAIL: COLIBRI is not set (run via 'make integration-test' or"
        echo "      COLIBRI=build/x86_64/colibri sh tests/run_integration.sh)"
        exit 1
    fi
    if [ ! -x "$COLIBRI" ]; then
        echo "FAIL: COLIBRI=$COLIBRI is not an executable file (is the CLI built? make -j2)"
        exit 1
    fi
}

csv() {
    echo "$*" | tr -s ' \n' ',' | sed 's/^,//; s/,$//'
}

# colibri_convert SRC OUT [extra args]: returns non-zero (after printing why) on failure
colibri_convert() {
    _src=$1; _out=$2; shift 2
    echo "+ colibri convert $_src -o $_out $*"
    "$COLIBRI" convert "$_src" -o "$_out" "$@" >"$WORK/convert.out" 2>"$WORK/convert.err"
    _st=$?
    if [ "$_st" -ne 0 ]; then
        fail "colibri convert $_src $* exited with status $_st ; stderr:"
        sed 's/^/    /' "$WORK/convert.err" | tail -20
        return 1
    fi
    if [ ! -s "$_out" ]; then
        fail "colibri convert reported success but $_out is missing or empty"
        return 1
    fi
    return 0
}

# colibri_run IDSFILE [run args]: writes stdout (the greedy ids) to IDSFILE
colibri_run() {
    _ids=$1; shift
    echo "+ colibri run $*"
    "$COLIBRI" run "$@" >"$_ids" 2>"$WORK/run.err"
    _st=$?
    if [ "$_st" -ne 0 ]; then
        fail "colibri run $* exited with status $_st ; stderr:"
        sed 's/^/    /' "$WORK/run.err" | tail -20
        return 1
    fi
    return 0
}

# serve_port ERR PID: the port a `colibri serve` (pid PID, stderr in ERR) listens on, once it
# says so (up to 90 s); empty when it ended first or never said
serve_port() {
    _p=
    for _i in $(seq 1 900); do
        _p=$(sed -n 's/.*serving .* on http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$1")
        [ -n "$_p" ] && break
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    echo "$_p"
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$1: $FAILS check(s) FAILED"
        exit 1
    fi
    echo "$1: OK"
    exit 0
}

# expect_clean_error PATTERN CMD...: `colibri CMD...` must exit non-zero (not by a signal,
# not after 60 s) with exactly one "colibri: ..." line on stderr that mentions PATTERN
expect_clean_error() {
    _pat=$1; shift
    timeout 60 "$COLIBRI" "$@" >"$WORK/ece.out" 2>"$WORK/ece.err"
    _st=$?
    if [ "$_st" -eq 0 ] || [ "$_st" -ge 124 ]; then
        fail "colibri $* : status $_st (want a clean error)"; sed 's/^/    /' "$WORK/ece.err" | head -5; return 1
    fi
    if [ "$(wc -l <"$WORK/ece.err")" -ne 1 ] || ! grep -q "^colibri: " "$WORK/ece.err"; then
        fail "colibri $* : want one 'colibri: ...' line on stderr, got:"; sed 's/^/    /' "$WORK/ece.err" | head -5
        return 1
    fi
    if ! grep -qi -- "$_pat" "$WORK/ece.err"; then
        fail "colibri $* : the message does not mention '$_pat': $(cat "$WORK/ece.err")"; return 1
    fi
    return 0
}
