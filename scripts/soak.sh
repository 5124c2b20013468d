#!/usr/bin/env bash
# Soak test of `deskside serve` on stories260K: many concurrent clients (streaming and not,
# greedy and sampled, some disconnecting at random) for a bounded time. Fails unless every
# completed response is well formed, every greedy output equals the same request run alone, no
# response is a 5xx, the server exits 0 on SIGTERM, and RSS after the load is within 10 % of its
# plateau under load.
#   scripts/soak.sh [SECONDS] [CLIENTS]   (default 180 s, 64 clients)
#   scripts/soak.sh --short               (20 s, 32 clients: the CI version)
# DESKSIDE_BUILD names the build directory (default build). DESKSIDE_SANITIZED=1 (an ASan build,
# as scripts/test.sh runs it) runs the server without ASan's quarantine and judges memory by
# LeakSanitizer instead of the plateau: a clean exit (no leak, no report in the server's log) and
# RSS after the load within 10 % of its peak. ASan's allocator grows its size-class regions for
# a minute or more under this load (about 250 to 430 MiB in 40 s with no leak), so a 20 s run
# never reaches a plateau; the plateau stays in the figures. Figures: docs/RELIABILITY.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--short" ]; then seconds=20 clients=32; else seconds="${1:-180}" clients="${2:-64}"; fi
exec .venv/bin/python - "$seconds" "$clients" <<'EOF'
import json, os, random, socket, subprocess, sys, threading, time
import requests

sys.path.insert(0, "tests/api")
from serve_helpers import STORIES, TEMPLATE, Server  # noqa: E402

seconds, clients = float(sys.argv[1]), int(sys.argv[2])
env = None
sanitized = os.environ.get("DESKSIDE_SANITIZED") == "1"
if sanitized:  # as tests/api's test_memory_back_near_baseline
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0"}
server = Server(STORIES, "--chat-template", TEMPLATE, "--parallel", 8, "--ctx-size", 512, "--queue", 512,
                "--max-client-conns", 4 * clients, env=env)
PROMPTS = [f"Once upon a time there was a {w}" for w in ["cat", "dog", "girl", "boy", "tree", "king", "fish", "sun"]]


def body(kind, prompt, greedy, stream, seed):
    b = {"model": "stories260K", "max_tokens": 24, "stream": stream}
    b.update({"temperature": 0} if greedy else {"temperature": 1.0, "seed": seed})
    if kind == "chat":
        b["messages"] = [{"role": "user", "content": prompt}]
    else:
        b["prompt"] = prompt
    return b


def text_of(kind, r, stream):
    """The generated text; raises on any malformed response."""
    if not stream:
        j = r.json()
        assert j["usage"]["completion_tokens"] >= 1 and j["choices"][0]["finish_reason"] in ("stop", "length")
        return j["choices"][0]["message"]["content"] if kind == "chat" else j["choices"][0]["text"]
    lines = [l for l in r.iter_lines() if l]
    assert lines[-1] == b"data: [DONE]", lines[-1:]
    out, finish = "", None
    for l in lines[:-1]:
        assert l.startswith(b"data: ")
        c = json.loads(l[6:])["choices"][0]
        out += (c["delta"].get("content") or "") if kind == "chat" else c["text"]
        finish = c.get("finish_reason") or finish
    assert finish in ("stop", "length"), finish
    return out


def request(kind, b):
    path = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
    return requests.post(server.url + path, json=b, stream=b["stream"], timeout=120)


solo = {}
for kind in ("chat", "completion"):
    for p in PROMPTS:
        solo[kind, p] = text_of(kind, request(kind, body(kind, p, True, False, 0)), False)

stats = {"ok": 0, "stream": 0, "greedy": 0, "disconnects": 0, "mismatch": 0, "malformed": 0, "5xx": 0, "other": 0}
lock = threading.Lock()
deadline = time.monotonic() + seconds


def count(key):
    with lock:
        stats[key] += 1


def disconnect(kind, b):
    """Sends the request on a raw socket and goes away mid-way (before or during the answer)."""
    data = json.dumps(b).encode()
    path = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    time.sleep(random.uniform(0, 0.3))
    s.close()
    count("disconnects")


def client(i):
    rng = random.Random(i)
    while time.monotonic() < deadline:
        kind, p = rng.choice(["chat", "completion"]), rng.choice(PROMPTS)
        greedy, stream = rng.random() < 0.5, rng.random() < 0.5
        b = body(kind, p, greedy, stream, rng.randrange(1 << 30))
        if rng.random() < 0.1:
            disconnect(kind, b)
            continue
        try:
            r = request(kind, b)
            if r.status_code >= 500:
                count("5xx")
                continue
            if r.status_code != 200:
                count("other")
                continue
            out = text_of(kind, r, stream)
        except Exception as e:  # noqa: BLE001 - any failure to read a response is a malformed one
            print("malformed:", repr(e)[:200], file=sys.stderr)
            count("malformed")
            continue
        count("ok")
        if stream:
            count("stream")
        if greedy:
            count("greedy")
            if out != solo[kind, p]:
                count("mismatch")


rss = []
sampler_stop = threading.Event()


def sample():
    while not sampler_stop.wait(0.5):
        rss.append(server.rss_kib())


t0 = time.monotonic()
sampler = threading.Thread(target=sample)
sampler.start()
threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.monotonic() - t0
sampler_stop.set()
sampler.join()
time.sleep(3)  # disconnected requests finish cancelling
after = server.rss_kib()
# The plateau: the median RSS over the second half of the load, once every buffer has been grown.
half = sorted(rss[len(rss) // 2:])
plateau = half[len(half) // 2]
health = requests.get(server.url + "/health", timeout=5).status_code
exit_code = server.stop()
log = server.read_log()
reports = [m for m in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:") if m in log]
if reports:
    print(log, file=sys.stderr)
print(f"soak: {clients} clients, {elapsed:.0f} s: {stats['ok']} completed ({stats['stream']} streamed, "
      f"{stats['greedy']} greedy), {stats['disconnects']} disconnects, {stats['mismatch']} greedy mismatches, "
      f"{stats['malformed']} malformed, {stats['5xx']} 5xx, {stats['other']} other non-200; RSS plateau "
      f"{plateau / 1024:.1f} MiB, peak {max(rss) / 1024:.1f} MiB, after {after / 1024:.1f} MiB; /health {health}; "
      f"exit {exit_code}" + (f", {', '.join(reports)}" if reports else "") +
      ("; memory judged against the peak and by LeakSanitizer (ASan build)" if sanitized else ""))
memory_grew = after > (max(rss) if sanitized else plateau) * 1.10
failed = stats["mismatch"] or stats["malformed"] or stats["5xx"] or stats["other"] or health != 200 \
    or memory_grew or exit_code != 0 or reports or stats["ok"] == 0
sys.exit(1 if failed else 0)
EOF
