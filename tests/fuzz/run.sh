#!/bin/sh
# tests/fuzz/run.sh SECONDS [TARGET...] — builds the libFuzzer targets with clang
# (-fsanitize=fuzzer,address,undefined) into build/fuzz/, regenerates the seed corpus in
# tests/fuzz/corpus/, runs each target for SECONDS seconds and prints one line per target:
#   fuzz_gguf: 123456 execs, no crash
# Exits non-zero when a target crashes, leaks, times out or fails to build; the crashing
# input is kept as build/fuzz/crash-<target>-*. Run from the repository root.
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev). Targets: fuzz_gguf,
# fuzz_container, fuzz_safetensors, fuzz_container_v2, fuzz_codec, fuzz_tokenizer (tokenizer.json
# + encoding), fuzz_gguf_vocab (GGUF vocabularies), fuzz_chat_template, fuzz_hf_config,
# fuzz_runtime_config, fuzz_serve_request (the server's request bodies; default: all). A crash is reproduced with
#   build/fuzz/fuzz_gguf build/fuzz/crash-fuzz_gguf-<hash>
set -u
SECS=${1:-10}
[ $# -gt 0 ] && shift
TARGETS=${*:-fuzz_gguf fuzz_container fuzz_safetensors fuzz_container_v2 fuzz_codec fuzz_tokenizer fuzz_gguf_vocab fuzz_chat_template fuzz_hf_config fuzz_runtime_config fuzz_serve_request}
CC=${FUZZ_CC:-clang}
OUT=build/fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -Iinclude -Isrc -pthread $SAN ${FUZZ_DEFS:-}"
# the libraries the engine links: the Makefile passes its own list (FUZZ_LIBS)
LIBS=${FUZZ_LIBS:?run through make fuzz, which passes the libraries of the engine}
JOBS=${FUZZ_JOBS:-2}

case "$SECS" in ''|*[!0-9]*) echo "usage: $0 SECONDS [TARGET...]" >&2; exit 2 ;; esac
[ -f src/format/gguf.c ] || { echo "run from the repository root" >&2; exit 2; }
command -v "$CC" >/dev/null || { echo "$CC not found (apt-get install clang)" >&2; exit 2; }
mkdir -p "$OUT/obj" "$OUT/corpus" || exit 2

case "$($CC -dumpmachine)" in
    x86_64*) ARCH=x86_64 ;;
    aarch64*) ARCH=aarch64 ;;
    *) ARCH=other ;;
esac

# ---- library objects (instrumented for coverage, not linked with the fuzzer main) ----
# An object is rebuilt when its source or any header is newer than it.
newest_hdr=$(ls -t include/*.h src/*/*.h tests/fuzz/run.sh 2>/dev/null | head -n 1)
list="$OUT/obj/todo.txt"
: >"$list"
OBJS=""
for src in src/*.c src/*/*.c; do
    [ -f "$src" ] || continue
    case "$src" in src/minimal/*) continue ;; esac # stand-ins for make static MINIMAL=1 only
    obj="$OUT/obj/$(echo "$src" | sed 's|/|_|g; s|\.c$|.o|')"
    OBJS="$OBJS $obj"
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_hdr" -nt "$obj" ]; then
        isa=""
        case "$ARCH:$(basename "$src" .c)" in
            x86_64:x86_avx2) isa="-mavx2 -mfma -mf16c" ;;
            x86_64:x86_avx512) isa="-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512vbmi" ;;
            aarch64:arm_neon) isa="-march=armv8.2-a+dotprod+fp16" ;;
        esac
        echo "$src $obj${isa:+ $isa}" >>"$list" # no trailing blank: xargs -L joins such lines
    fi
done
if [ -s "$list" ]; then
    echo "fuzz: compiling $(wc -l <"$list") library files with $CC"
    # shellcheck disable=SC2086
    if ! xargs -P "$JOBS" -L 1 sh -c \
        "src=\"\$0\" obj=\"\$1\"; shift; exec $CC $CFLAGS -fsanitize=fuzzer-no-link -c \"\$src\" -o \"\$obj\" \"\$@\"" <"$list"; then
        echo "fuzz: library build failed" >&2
        exit 1
    fi
fi

# ---- seeds ----
/usr/bin/python3 tests/fuzz/make_corpus.py tests/fuzz/corpus || { echo "fuzz: make_corpus.py failed" >&2; exit 1; }
# shellcheck disable=SC2086
if $CC $CFLAGS tests/fuzz/gen_container.c $OBJS $LIBS -o "$OUT/gen_container"; then
    mkdir -p tests/fuzz/corpus/container tests/fuzz/corpus/container_v2
    "$OUT/gen_container" tests/fuzz/corpus/container tests/fuzz/corpus/container_v2 || { echo "fuzz: gen_container failed" >&2; exit 1; }
else
    echo "fuzz: gen_container did not build" >&2
    exit 1
fi

# ---- targets ----
status=0
for t in $TARGETS; do
    case "$t" in
        fuzz_gguf) seeds=tests/fuzz/corpus/gguf ;;
        fuzz_container) seeds=tests/fuzz/corpus/container ;;
        fuzz_safetensors) seeds=tests/fuzz/corpus/safetensors ;;
        fuzz_container_v2 | fuzz_codec) seeds=tests/fuzz/corpus/container_v2 ;;
        fuzz_tokenizer) seeds=tests/fuzz/corpus/tokenizer ;;
        fuzz_gguf_vocab) seeds=tests/fuzz/corpus/gguf ;;
        fuzz_chat_template) seeds=tests/fuzz/corpus/chat_template ;;
        fuzz_hf_config) seeds=tests/fuzz/corpus/hf_config ;;
        fuzz_runtime_config) seeds=tests/fuzz/corpus/runtime_config ;;
        fuzz_serve_request) seeds=tests/fuzz/corpus/serve_request ;;
        *) echo "unknown target $t" >&2; status=1; continue ;;
    esac
    # shellcheck disable=SC2086
    extra="" # the server's request code (cli/, public API only) for its target
    [ "$t" = fuzz_serve_request ] && extra="-Icli cli/serve_openai.c cli/serve_sched.c cli/common.c"
    if ! $CC $CFLAGS -fsanitize=fuzzer "tests/fuzz/$t.c" $extra $OBJS $LIBS -o "$OUT/$t"; then
        echo "$t: build failed"
        status=1
        continue
    fi
    work="$OUT/corpus/$t" # grows across runs; the committed seeds stay untouched
    mkdir -p "$work"
    log="$OUT/$t.log"
    "$OUT/$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$OUT/crash-$t-" "$work" "$seeds" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    [ -n "$execs" ] || execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        echo "$t: ${execs:-?} execs, no crash"
    else
        status=1
        echo "$t: CRASH (exit $rc) after ${execs:-?} execs; log $log"
        ls "$OUT"/crash-"$t"-* 2>/dev/null | sed 's/^/  input: /'
        grep -m 5 -E "ERROR|SUMMARY|runtime error" "$log" | sed 's/^/  /'
    fi
done
exit $status
