#!/bin/sh
# integration: alone (it measures time, page-cache residency or RSS: no other script beside it)
# colibri serve end to end: the official openai JavaScript client (chat and completions,
# streamed and not, usage, stop strings, seeds, logprobs, 4 concurrent streams against the
# same requests one at a time, abort), bad input over raw sockets, a bounded soak with the
# RSS before and after, the web page in headless Chromium, graceful shutdown.
# The npm packages (tests/server/package-lock.json) go to build/node (not committed).
# SERVE_SOAK_SECONDS (default 60) bounds the soak.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
MODEL="$ROOT/models/colibri-tiny.colibri"
SOAK=${SERVE_SOAK_SECONDS:-60}
command -v node >/dev/null 2>&1 || { fail "node is not installed (make deps)"; exit 1; }
command -v npm >/dev/null 2>&1 || { fail "npm is not installed (make deps)"; exit 1; }

# the test tooling from npm, once per lock file
NODE_DIR="$ROOT/build/node"
mkdir -p "$NODE_DIR"
if ! cmp -s "$ROOT/tests/server/package-lock.json" "$NODE_DIR/package-lock.json" || [ ! -d "$NODE_DIR/node_modules/openai" ]; then
    cp "$ROOT/tests/server/package.json" "$ROOT/tests/server/package-lock.json" "$NODE_DIR/"
    echo "+ npm ci in $NODE_DIR"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || { fail "npm ci failed"; exit 1; }
fi
cp "$ROOT"/tests/server/*.mjs "$NODE_DIR/" # so that their imports find node_modules

# refusals at start-up: one line, non-zero
"$COLIBRI" serve -m "$MODEL" --host 0.0.0.0 --port 0 >/dev/null 2>"$WORK/e1"
st=$?
[ "$st" -eq 2 ] && grep -q "not loopback" "$WORK/e1" && [ "$(wc -l <"$WORK/e1")" -eq 1 ] || fail "non-loopback without a key: status $st, $(cat "$WORK/e1")"
"$COLIBRI" serve -m "$MODEL" --bogus >/dev/null 2>"$WORK/e2"
[ $? -eq 2 ] && grep -q "unknown option" "$WORK/e2" || fail "serve --bogus: $(cat "$WORK/e2")"
printf '' >"$WORK/emptykey"
"$COLIBRI" serve -m "$MODEL" --api-key-file "$WORK/emptykey" >/dev/null 2>"$WORK/e3"
[ $? -eq 2 ] && grep -q "empty" "$WORK/e3" || fail "an empty key file: $(cat "$WORK/e3")"

KEY=test-key-$$
printf '%s\n' "$KEY" >"$WORK/key"
MAXBODY=65536; QUEUE=2; PAR=4
# under ASan a small quarantine, so that the RSS comparison measures the server, not ASan;
# two C-library arenas, so that a connection thread's fresh arena cannot pass for a leak
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8" MALLOC_ARENA_MAX=2 \
"$COLIBRI" serve -m "$MODEL" --port 0 -t 2 --api-key-file "$WORK/key" --max-body $MAXBODY --queue $QUEUE \
    --parallel $PAR --ctx-size 256 >"$WORK/server.out" 2>"$WORK/server.err" &
SP=$!
PORT=$(serve_port "$WORK/server.err" $SP)
if [ -z "$PORT" ]; then
    fail "the server did not start:"; cat "$WORK/server.err"; kill $SP 2>/dev/null; exit 1
fi
echo "server pid $SP on port $PORT"
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$SP/status; }

echo "== the openai client"
timeout 600 node "$NODE_DIR/client.mjs" "http://127.0.0.1:$PORT/v1" "$KEY" || fail "the openai client tests"
echo "== bad input over raw sockets"
timeout 300 node "$NODE_DIR/raw.mjs" "$PORT" "$KEY" $MAXBODY $QUEUE $PAR || fail "the raw socket tests"
if [ -f "$NODE_DIR/page.mjs" ]; then
    echo "== the page in headless Chromium"
    timeout 300 node "$NODE_DIR/page.mjs" "$PORT" "$KEY" "$ROOT/build/serve-page.png" || fail "the page test"
fi
echo "== soak (${SOAK} s)"
timeout 120 node "$NODE_DIR/soak.mjs" "$PORT" "$KEY" 10 >/dev/null || fail "the soak warm-up"
# a short warm-up first: the C library keeps an arena per connection thread, which grows
# once; a leak grows with every request and shows in the full soak after it
WARM=$((SOAK < 10 ? SOAK : 10))
timeout $((WARM + 300)) node "$NODE_DIR/soak.mjs" "$PORT" "$KEY" "$WARM" || fail "the warm-up soak"
# the soak in two halves: a leak grows in each (with every request), a one-time growth of
# the allocator's arenas or the server's buffers does not recur in the second half
HALF=$(((SOAK + 1) / 2))
before=$(rss)
timeout $((HALF + 300)) node "$NODE_DIR/soak.mjs" "$PORT" "$KEY" "$HALF" || fail "the soak (first half)"
mid=$(rss)
timeout $((HALF + 300)) node "$NODE_DIR/soak.mjs" "$PORT" "$KEY" "$HALF" || fail "the soak (second half)"
after=$(rss)
echo "RSS before the soak ${before} kB, after the first half ${mid} kB, after the second ${after} kB"
[ -n "$before" ] && [ -n "$mid" ] && [ -n "$after" ] || fail "no RSS reading"
[ $((after - mid)) -lt 6144 ] || fail "RSS grew by $((after - mid)) kB over the second half of the soak (first half: $((mid - before)) kB)"
[ $((after - before)) -lt 16384 ] || fail "RSS grew by $((after - before)) kB over the soak"
curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 || fail "/health after the soak"

echo "== shutdown (SIGTERM with a stream running)"
curl -sN -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/completions" \
    -d '{"prompt":"Once","max_tokens":240,"ignore_eos":true,"stream":true}' >"$WORK/stream.out" 2>/dev/null &
CP=$!
sleep 0.3
kill -TERM $SP
wait $CP
tail -n 1 "$WORK/stream.out" | grep -q '^data: \[DONE\]' || grep -q '^data: \[DONE\]' "$WORK/stream.out" ||
    fail "the stream running at SIGTERM did not end with data: [DONE]: $(tail -c 300 "$WORK/stream.out")"
for i in $(seq 1 300); do kill -0 $SP 2>/dev/null || break; sleep 0.1; done
if kill -0 $SP 2>/dev/null; then fail "the server did not exit within 30 s of SIGTERM"; kill -KILL $SP; fi
wait $SP
st=$?
[ "$st" -eq 0 ] || fail "the server exited with status $st after SIGTERM"
if grep -qE "AddressSanitizer|LeakSanitizer|runtime error" "$WORK/server.err"; then
    fail "sanitizer reports:"; head -40 "$WORK/server.err"
fi
[ "$FAILS" -eq 0 ] && echo "serve: all passed"
exit $((FAILS > 0))
