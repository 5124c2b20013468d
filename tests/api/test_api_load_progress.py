"""Feedback while `deskside serve` loads its model: the port answers first, /health reports the
load's progress (503 {"status":"loading","progress":p}, p rising from 0 towards 1), the API routes
answer 503 with Retry-After, then /health turns 200. DESKSIDE_TEST_LOAD_DELAY_MS, a test hook
(cli/load_bar.h), sleeps after each tensor placed so that a tiny model loads slowly enough to watch;
nothing is timed, the polls only see more or fewer steps. Also: SIGTERM while loading ends the
server cleanly, and a file that is no model still fails serve with its message."""
import os
import signal
import subprocess
import time

import requests

from serve_helpers import STORIES, deskside_binary, free_port


def start_loading(delay_ms, tmp_path, model=STORIES):
    port = free_port()
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([str(deskside_binary()), "serve", "-m", str(model), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "DESKSIDE_TEST_LOAD_DELAY_MS": str(delay_ms)})
    return proc, f"http://127.0.0.1:{port}", log


def read(log):
    log.flush()
    log.seek(0)
    return log.read()


def poll_health(url, proc, until, deadline_s=120):
    """GET /health until until(response) is true; returns every response seen (connection refusals
    while the port is not yet bound are skipped)."""
    seen = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            r = requests.get(url + "/health", timeout=5)
        except requests.ConnectionError:
            time.sleep(0.01)
            continue
        seen.append(r)
        if until(r):
            return seen
        time.sleep(0.01)
    raise AssertionError(f"no such /health answer; saw {[(r.status_code, r.text) for r in seen[-5:]]}")


def test_health_reports_progress_while_loading(tmp_path):
    proc, url, log = start_loading(40, tmp_path)
    try:
        api_checked = False

        def until(r):
            nonlocal api_checked
            if r.status_code == 503 and not api_checked:
                # Every other route: 503 with an OpenAI-shaped error and Retry-After.
                m = requests.get(url + "/v1/models", timeout=5)
                assert m.status_code == 503 and m.headers.get("Retry-After") == "1", m.text
                assert "loading" in m.json()["error"]["message"]
                c = requests.post(url + "/v1/completions", json={"prompt": "Once", "max_tokens": 1}, timeout=5)
                assert c.status_code in (200, 503)  # 200 only if the load finished in between
                assert requests.get(url + "/metrics", timeout=5).status_code == 200
                api_checked = True
            return r.status_code == 200

        seen = poll_health(url, proc, until)
        loading = [r for r in seen if r.status_code == 503]
        assert loading and api_checked
        for r in loading:
            body = r.json()
            assert set(body) == {"status", "progress"} and body["status"] == "loading", body
            assert 0 <= body["progress"] < 1, body
            assert r.headers.get("Retry-After") == "1"
        progress = [r.json()["progress"] for r in loading]
        assert progress == sorted(progress), progress
        assert len(set(progress)) >= 3, progress  # ~50 tensors at 40 ms each: many steps seen
        assert seen[-1].json() == {"status": "ok"}
        text = read(log)
        # stderr is a file: plain start and end lines per device, no redrawn bar; "ready" once loaded.
        assert "\r" not in text
        start = text.index("loading stories260K: cpu: repacking")
        end = text.index("loading stories260K: cpu: done in")
        assert start < end < text.index("deskside serve: ready")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0


def test_sigterm_while_loading_exits_cleanly(tmp_path):
    proc, url, log = start_loading(1000, tmp_path)  # ~50 s of loading if nothing stopped it
    try:
        poll_health(url, proc, lambda r: r.status_code == 503 and r.json()["progress"] > 0)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        assert time.monotonic() - t0 < 25  # stopped at the next tensor, not after the whole load
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = read(log)
    assert proc.returncode == 0, text
    assert "interrupted while loading" in text and "ready" not in text, text


def test_a_bad_model_file_still_fails_serve(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 12)
    proc, url, log = start_loading(0, tmp_path, model=bad)
    proc.wait(60)
    text = read(log)
    assert proc.returncode == 1, text
    assert str(bad) in text and "ready" not in text, text
