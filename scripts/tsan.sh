#!/usr/bin/env bash
# ThreadSanitizer run of the server and the engine loop: builds deskside and deskside_tests with
# -fsanitize=thread (DESKSIDE_SANITIZE=thread, CPU backend only) in build-tsan, runs the
# [engine-loop] and [server] Catch2 tests, then a short `deskside serve` under concurrent
# streaming and non-streaming requests with client disconnects. Fails on any ThreadSanitizer
# report; the reports are kept in build-tsan/tsan-*.log. Not part of CI (the build alone takes
# longer than CI's budget on two cores); docs/RELIABILITY.md records its result.
#   scripts/tsan.sh [REQUESTS]   (default 64 requests, 8 at a time)
set -uo pipefail
cd "$(dirname "$0")/.."
requests="${1:-64}"
build=build-tsan
export CCACHE_BASEDIR="$PWD"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDESKSIDE_SANITIZE=thread -DDESKSIDE_CUDA=OFF \
  -DDESKSIDE_VULKAN=OFF > "$build-configure.log" 2>&1 || { cat "$build-configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target deskside deskside_tests 2>&1 | grep -E "error|Error" ; \
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

# Reports go to a file per process (the tests start deskside children too); halt_on_error=0 lets a
# run show every race it meets.
rm -f "$build"/tsan-*.log*
# One suppression, for a false positive of an uninstrumented library: Debian's cpp-httplib is a
# shared library built without -fsanitize=thread, and the end of a chunked response writes its
# function-local statics ("0\r\n", "\r\n"). The first worker to get there constructs them under
# __cxa_guard_acquire; the others take the guard's fast path, a load ThreadSanitizer cannot see in
# uninstrumented code, so their send() of those bytes is reported as racing with the
# construction. The rule hides races on bytes httplib::detail::write_data sends; our own buffers
# reach it only from the thread that filled them.
printf 'race:httplib::detail::write_data\n' > "$build/tsan.supp"
export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:log_path=$PWD/$build/tsan-report.log:suppressions=$PWD/$build/tsan.supp:print_suppressions=1"
status=0
"$build/tests/deskside_tests" "[engine-loop],[server]" > "$build/tsan-tests.log" 2>&1 || status=1
tail -n 3 "$build/tsan-tests.log"

port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$build/deskside" serve -m ../shared/models/stories260K.gguf --port "$port" --parallel 4 --ctx-size 1024 \
  > "$build/tsan-serve.log" 2>&1 &
server=$!
.venv/bin/python - "$port" "$requests" <<'EOF' || status=1
import concurrent.futures, http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 120
while True:  # TSan makes start-up slow
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/health")
        if c.getresponse().status == 200: break
    except OSError:
        pass
    if time.monotonic() > deadline: sys.exit("serve did not come up")
    time.sleep(0.5)

def one(i):
    body = {"model": "stories260K", "prompt": f"Once upon a time {i}", "max_tokens": 16, "temperature": 0,
            "stream": i % 2 == 0}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if i % 8 == 7:  # a client that goes away mid-answer cancels its sequence
        r.read(1); c.close(); return "dropped"
    data = r.read()
    return "ok" if r.status == 200 and data else f"HTTP {r.status}"

with concurrent.futures.ThreadPoolExecutor(8) as pool:
    results = list(pool.map(one, range(n)))
print({k: results.count(k) for k in set(results)})
sys.exit(0 if all(r in ("ok", "dropped") for r in results) else 1)
EOF
kill -TERM "$server"
wait "$server" || status=1

reports=$(cat "$build"/tsan-report.log* 2>/dev/null | grep -c "WARNING: ThreadSanitizer")
suppressed=$(cat "$build"/tsan-report.log* 2>/dev/null | grep -A1 "Matched .* suppressions" | grep -oE "^ *[0-9]+ race" \
  | awk '{n += $1} END {print n + 0}')
echo "tsan: $reports ThreadSanitizer reports, $suppressed suppressed (build-tsan/tsan-report.log.*)"
[ "$reports" -eq 0 ] || status=1
exit $status
