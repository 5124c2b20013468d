"""What a web page or an unauthenticated client can make the server do: /metrics series, Host
and Content-Type checks (DNS rebinding, simple cross-origin POSTs), CORS, the access log, and
the warning for an open server."""
import json
import re
import subprocess
import time

import requests

from hostile import ALLOWED_HOST, CORS_ORIGIN, connect, expect_error, healthy, post_bytes, raw, read_response
from serve_helpers import STORIES, deskside_binary, free_port

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? \S+$')


def test_metrics_labels_are_route_templates(keyed):
    """Defect 2: 401s on made-up paths add no series and cannot forge lines."""
    for i in range(300):
        requests.get(f"{keyed.url}/v1/made-up-{i}", timeout=10)
    forged = '/v1/x"} 1e9\ndeskside_forged_total{a="'
    raw(keyed.port, b"GET " + requests.utils.quote(forged).encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    text = requests.get(keyed.url + "/metrics", timeout=10).text
    assert "made-up" not in text and "forged" not in text
    for line in text.splitlines():
        assert line.startswith("#") or SAMPLE.match(line), line
    routes = set(re.findall(r'deskside_requests_total\{route="([^"]*)"', text))
    assert routes <= {"other", "/health", "/metrics", "/v1/models", "/v1/models/{id}", "/v1/completions",
                      "/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/v1/messages",
                      "/v1/messages/count_tokens", "/tokenize", "/detokenize", "/tokenizer_info"}, routes
    assert int(re.search(r'deskside_requests_total\{route="other",status="401"\} (\d+)', text).group(1)) >= 301


def test_host_header_guards_against_dns_rebinding(hard):
    def health(host):
        return raw(hard.port, f"GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())

    for ok in ["127.0.0.1", f"127.0.0.1:{hard.port}", "localhost", f"localhost:{hard.port}", "[::1]", ALLOWED_HOST]:
        assert health(ok).status == 200, ok
    for bad in ["attacker.example", f"rebind.attacker.example:{hard.port}", "127.0.0.1.nip.io"]:
        err = expect_error(health(bad), 403)
        assert err["code"] == "host_not_allowed"


def test_post_bodies_must_be_json(hard):
    body = json.dumps({"model": "stories260K", "prompt": "Once", "max_tokens": 2}).encode()
    for content_type, status in [("text/plain", 415), ("application/x-www-form-urlencoded", 415),
                                 ("multipart/form-data; boundary=x", 415), (None, 400)]:
        expect_error(raw(hard.port, post_bytes("/v1/completions", body, content_type)), status)
    ok = raw(hard.port, post_bytes("/v1/completions", body, "application/json; charset=utf-8"))
    assert ok.status == 200, ok.body


def test_cors_preflight_and_headers(hard, keyed):
    preflight = {"Origin": CORS_ORIGIN, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}
    r = requests.options(hard.url + "/v1/chat/completions", headers=preflight, timeout=10)
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == CORS_ORIGIN
    assert "POST" in r.headers["Access-Control-Allow-Methods"]
    assert "authorization" in r.headers["Access-Control-Allow-Headers"].lower()
    r = requests.get(hard.url + "/v1/models", headers={"Origin": CORS_ORIGIN}, timeout=10)
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == CORS_ORIGIN
    other = dict(preflight, Origin="http://evil.example")
    r = requests.options(hard.url + "/v1/chat/completions", headers=other, timeout=10)
    assert "Access-Control-Allow-Origin" not in r.headers
    # Off by default: no CORS headers at all, and a preflight is not answered.
    r = requests.options(keyed.url + "/v1/chat/completions", headers=preflight, timeout=10)
    assert r.status_code != 204 and "Access-Control-Allow-Origin" not in r.headers
    r = requests.get(keyed.url + "/health", headers={"Origin": CORS_ORIGIN}, timeout=10)
    assert "Access-Control-Allow-Origin" not in r.headers


def log_lines(server, pattern):
    return [l for l in server.read_log().splitlines() if re.search(pattern, l)]


def test_access_log_text(hard):
    out = requests.post(hard.url + "/v1/completions", json={"model": "stories260K", "prompt": "Once upon",
                                                            "max_tokens": 5, "ignore_eos": True}, timeout=30).json()
    prompt = out["usage"]["prompt_tokens"]
    stream = requests.post(hard.url + "/v1/completions", stream=True, timeout=30, json={
        "model": "stories260K", "prompt": "Once upon", "max_tokens": 3, "ignore_eos": True, "stream": True,
        "stream_options": {"include_usage": True}})
    list(stream.iter_lines())
    time.sleep(0.2)
    line = r"^\S+Z 127\.0\.0\.1 POST /v1/completions 200 tokens=%d/%d [0-9.]+ms$"
    assert log_lines(hard, line % (prompt, 5)), hard.read_log()[-2000:]
    assert log_lines(hard, line % (prompt, 3)), hard.read_log()[-2000:]


def test_access_log_json(keyed):
    requests.get(keyed.url + "/v1/models", timeout=10)  # 401: no key
    time.sleep(0.2)
    records = [json.loads(l) for l in keyed.read_log().splitlines() if l.startswith('{"time"')]
    r = next(r for r in records if r["path"] == "/v1/models" and r["status"] == 401)
    assert set(r) == {"time", "client", "method", "path", "status", "prompt_tokens", "completion_tokens", "ms"}
    assert r["method"] == "GET" and r["prompt_tokens"] is None and r["ms"] >= 0


def test_every_interface_without_a_key_warns():
    port = free_port()
    p = subprocess.Popen([str(deskside_binary()), "serve", "-m", str(STORIES), "--host", "0.0.0.0", "--port", str(port)],
                         stderr=subprocess.PIPE, text=True)
    try:
        first = p.stderr.readline()
        assert "warning" in first and "--api-key" in first, first
    finally:
        p.kill()
        p.wait()


def test_expect_continue_over_the_limit_is_refused_before_the_body(hard):
    with connect(hard.port) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 99999999\r\nExpect: 100-continue\r\n\r\n")
        expect_error(read_response(s), 413)
    assert healthy(hard)
