"""`deskside fits` and pull's plan before a download: a ~100 MB GGUF served by a local HTTP server
that counts the bytes it sends. The plan from a URL (http, hf:// through HF_ENDPOINT, a redirect as
Hugging Face answers) must equal the plan of the local copy while less than 1 % of the file is
read; a server that ignores Range stays bounded; bad sources fail with a clear message; a pull
whose model does not fit asks on a terminal and otherwise refuses without --yes.

Free memory is pinned with --free so that two runs plan against the same numbers; the largest
context is checked against the KV cache size computed here from the hyperparameters (gguf-py)."""
import http.server
import json
import os
import pathlib
import socketserver
import struct
import subprocess
import sys
import threading

import gguf
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
TIMEOUT = 120
SMALL = "stories260K-q4_0.gguf"


class Files:
    """What the server serves and what it counted."""

    def __init__(self):
        self.files = {}         # url path -> local file
        self.sent = 0           # body bytes written to clients
        self.ranges = []        # Range headers received (None for none)
        self.ignore_range = False
        self.no_content_range = False


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: Files = None

    def log_message(self, *args):
        pass

    def do_GET(self):
        s = self.state
        if "/resolve/main/" in self.path:  # Hugging Face: a redirect to its CDN
            self.send_response(302)
            self.send_header("Location", "/cdn/" + self.path.split("/resolve/main/", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = s.files.get(self.path.replace("/cdn/", "/", 1))
        if path is None:
            self.send_error(404)
            return
        size = path.stat().st_size
        rng = self.headers.get("Range")
        s.ranges.append(rng)
        start, end = 0, size - 1
        if rng and not s.ignore_range:
            first, last = rng.split("=", 1)[1].split("-")
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
            self.send_response(206)
            if not s.no_content_range:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(end + 1 - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        with path.open("rb") as f:
            f.seek(start)
            left = end + 1 - start
            try:
                while left > 0:
                    chunk = f.read(min(65536, left))
                    self.wfile.write(chunk)
                    s.sent += len(chunk)
                    left -= len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@pytest.fixture
def server():
    state = Files()
    srv = Server(("127.0.0.1", 0), type("Bound", (Handler,), {"state": state}))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield state
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def big_model(tmp_path_factory) -> pathlib.Path:
    """A llama GGUF of about 100 MB (3 layers of width 1024, F16) with stories260K's 512-token
    vocabulary, so its header is small and its weights are not."""
    out = tmp_path_factory.mktemp("fits") / "big.gguf"
    subprocess.run([sys.executable, str(REPO / "scripts" / "make-synthetic-model.py"), str(out), "--layers", "3",
                    "--embd", "1024", "--ff", "4096", "--heads", "8", "--kv-heads", "8",
                    "--tokenizer-from", str(SHARED / "models" / "stories260K.gguf")],
                   check=True, capture_output=True, timeout=TIMEOUT)
    assert out.stat().st_size > 95_000_000
    return out


def run(deskside_bin, *args, env_extra=None, **kw):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([str(deskside_bin), *args], capture_output=True, text=True, env=env, timeout=TIMEOUT, **kw)


def fits_json(deskside_bin, model, *flags, env_extra=None, ok=True):
    r = run(deskside_bin, "fits", str(model), "--json", *flags, env_extra=env_extra)
    assert r.returncode == (0 if ok else 1), r.stderr
    return json.loads(r.stdout)


def plan_text(stdout: str) -> str:
    """The text output from the plan on (the model line names the source, which differs)."""
    return stdout[stdout.index("placement:"):]


def kv_bytes_per_position(path) -> int:
    """F16 K and V of every layer, from the hyperparameters as gguf-py reads them."""
    fields = gguf.GGUFReader(str(path)).fields

    def value(key):
        f = fields[key]
        return int(f.parts[f.data[0]][0])

    n_embd, n_head = value("llama.embedding_length"), value("llama.attention.head_count")
    n_kv, n_layer = value("llama.attention.head_count_kv"), value("llama.block_count")
    return n_layer * 2 * n_kv * (n_embd // n_head) * 2


FREE = ["--free", "64GiB"]
SAME_KEYS = ("file_size", "architecture", "n_layer", "n_ctx_train", "placement", "fits", "largest_context",
             "context_limit")


def test_url_plan_equals_local_plan_reading_under_one_percent(deskside_bin, server, big_model):
    server.files["/big.gguf"] = big_model
    size = big_model.stat().st_size
    local = fits_json(deskside_bin, big_model, *FREE)
    remote = fits_json(deskside_bin, f"{server.url}/big.gguf", *FREE)
    assert server.sent < size / 100, (server.sent, size)
    assert remote["header_bytes_received"] == server.sent
    assert remote["header_requests"] == len(server.ranges)
    assert all(r and r.startswith("bytes=0-") for r in server.ranges[:1])
    assert {k: remote[k] for k in SAME_KEYS} == {k: local[k] for k in SAME_KEYS}
    assert local["fits"] is True and local["placement"]["error"] is None
    assert local["file_size"] == size and local["largest_context"] == local["n_ctx_train"]

    # The text report, from the plan on, is the same too.
    a = run(deskside_bin, "fits", str(big_model), *FREE)
    server.sent = 0
    b = run(deskside_bin, "fits", f"{server.url}/big.gguf", *FREE)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert plan_text(a.stdout) == plan_text(b.stdout)
    assert "fits:          yes" in a.stdout
    assert "header:" in b.stdout and "header:" not in a.stdout
    assert server.sent < size / 100


def test_hf_source_through_hf_endpoint_and_redirect(deskside_bin, server, big_model):
    server.files["/big.gguf"] = big_model
    local = fits_json(deskside_bin, big_model, *FREE)
    remote = fits_json(deskside_bin, "hf://org/repo/big.gguf", *FREE, env_extra={"HF_ENDPOINT": server.url + "/"})
    assert remote["url"] == f"{server.url}/org/repo/resolve/main/big.gguf"
    assert {k: remote[k] for k in SAME_KEYS} == {k: local[k] for k in SAME_KEYS}
    assert server.sent < big_model.stat().st_size / 100


def test_store_name(deskside_bin, big_model, tmp_path):
    env = {"DESKSIDE_MODELS": str(tmp_path / "store")}
    r = run(deskside_bin, "pull", str(big_model), "--link", "--name", "big", env_extra=env)
    assert r.returncode == 0, r.stderr
    by_name = fits_json(deskside_bin, "big", *FREE, env_extra=env)
    local = fits_json(deskside_bin, big_model, *FREE)
    assert {k: by_name[k] for k in SAME_KEYS} == {k: local[k] for k in SAME_KEYS}


def test_does_not_fit_gives_the_largest_context(deskside_bin, server, big_model):
    """Free memory for the weights, the scratch and 1000 positions: the default context (the
    model's 2048) does not fit, 992 (62 blocks of 16) does."""
    server.files["/big.gguf"] = big_model
    roomy = fits_json(deskside_bin, big_model, *FREE)["placement"]["devices"][0]
    per_position = kv_bytes_per_position(big_model)
    assert roomy["kv_bytes"] == 2048 * per_position
    free = roomy["weight_bytes"] + roomy["scratch_bytes"] + 1000 * per_position + 5
    flags = ["--devices", "gpu0", "--free", str(free)]
    local = fits_json(deskside_bin, big_model, *flags, ok=False)
    remote = fits_json(deskside_bin, f"{server.url}/big.gguf", *flags, ok=False)
    assert local["fits"] is False and local["largest_context"] == 992
    assert "gpu0" in local["placement"]["error"] and "--ctx-size 992" in local["placement"]["error"]
    assert {k: remote[k] for k in SAME_KEYS} == {k: local[k] for k in SAME_KEYS}
    # At the context found, it fits; two sequences halve it.
    assert fits_json(deskside_bin, big_model, *flags, "-c", "992")["fits"] is True
    assert fits_json(deskside_bin, big_model, *flags, "-c", "512", "-np", "2", ok=False)["largest_context"] == 496
    r = run(deskside_bin, "fits", f"{server.url}/big.gguf", *flags)
    assert r.returncode == 1
    assert "DOES NOT FIT" in r.stdout and "fits:          no" in r.stdout
    assert "largest context that fits: 992 per sequence" in r.stdout
    # Not even the weights: no context at all.
    tiny = fits_json(deskside_bin, big_model, "--free", "1MiB", ok=False)
    assert tiny["largest_context"] == 0


def test_server_ignoring_range_is_read_boundedly(deskside_bin, server, big_model):
    server.files["/big.gguf"] = big_model
    server.ignore_range = True
    local = fits_json(deskside_bin, big_model, *FREE)
    remote = fits_json(deskside_bin, f"{server.url}/big.gguf", *FREE)
    assert remote["ranges_ignored"] is True and remote["header_requests"] == 1
    assert {k: remote[k] for k in SAME_KEYS} == {k: local[k] for k in SAME_KEYS}
    # The transfer is cut once the header is in; what the server pushed into socket buffers before
    # it saw the close is all it sends.
    assert remote["header_bytes_received"] < 2 << 20
    assert server.sent < big_model.stat().st_size / 4


def test_bad_sources_fail_clearly(deskside_bin, server, big_model, tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04 not a model" * 1000)
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(big_model.read_bytes()[:3000])
    server.files.update({"/junk.gguf": junk, "/cut.gguf": truncated, "/big.gguf": big_model})

    r = run(deskside_bin, "fits", f"{server.url}/junk.gguf")
    assert r.returncode == 1 and "not a GGUF file" in r.stderr and "/junk.gguf" in r.stderr, r.stderr
    r = run(deskside_bin, "fits", f"{server.url}/cut.gguf")
    assert r.returncode == 1 and "/cut.gguf" in r.stderr, r.stderr
    assert "past the end of the file" in r.stderr or "truncated" in r.stderr, r.stderr
    # A header that claims more than fits reads before giving up: refused after the first read.
    huge = tmp_path / "huge.gguf"
    with huge.open("wb") as f:
        key = b"general.name"
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key)
        f.write(struct.pack("<IQ", 8, 70 << 20))
        f.truncate(100_000_000)
    server.files["/huge.gguf"] = huge
    server.sent = 0
    r = run(deskside_bin, "fits", f"{server.url}/huge.gguf")
    assert r.returncode == 1 and "larger than the 64 MiB" in r.stderr, r.stderr
    assert server.sent < 1 << 20
    r = run(deskside_bin, "fits", f"{server.url}/missing.gguf")
    assert r.returncode == 1 and "HTTP 404" in r.stderr, r.stderr
    server.no_content_range = True
    r = run(deskside_bin, "fits", f"{server.url}/big.gguf")
    assert r.returncode == 1 and "Content-Range" in r.stderr, r.stderr
    r = run(deskside_bin, "fits", "hf://only-org")
    assert r.returncode == 2 and "hf://ORG/REPO/FILE.gguf" in r.stderr, r.stderr
    r = run(deskside_bin, "fits", str(big_model), "--free", "lots")
    assert r.returncode == 2 and "--free" in r.stderr
    r = run(deskside_bin, "fits", str(big_model), "--devices", "a,b", "--free", "1GiB")
    assert r.returncode == 2 and "--free has 1 sizes for 2" in r.stderr


def pull_env(tmp_path):
    return {"DESKSIDE_MODELS": str(tmp_path / "store")}


def test_pull_prints_the_plan_before_downloading(deskside_bin, server, tmp_path):
    server.files["/" + SMALL] = SHARED / "models" / SMALL
    r = run(deskside_bin, "pull", f"{server.url}/{SMALL}", *FREE, env_extra=pull_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "placement:" in r.stderr and "fits:          yes" in r.stderr
    assert r.stdout.strip() == "stories260K-q4_0"
    # The header by a closed range, then the download.
    assert server.ranges[0].startswith("bytes=0-") and not server.ranges[0].endswith("-")
    assert server.ranges[-1] is None


def test_pull_of_a_model_that_does_not_fit(deskside_bin, server, tmp_path):
    server.files["/" + SMALL] = SHARED / "models" / SMALL
    url = f"{server.url}/{SMALL}"
    env = pull_env(tmp_path)
    # Not a terminal: refused without --yes, and nothing but the header was fetched.
    r = run(deskside_bin, "pull", url, "--free", "100KiB", env_extra=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    assert "does not fit" in r.stderr and "--yes" in r.stderr and "cpu" in r.stderr, r.stderr
    assert None not in server.ranges
    assert not (tmp_path / "store" / "stories260K-q4_0").exists()
    # On a terminal it asks; no is no.
    import pexpect
    child = pexpect.spawn(str(deskside_bin), ["pull", url, "--free", "100KiB"], env=dict(os.environ, **env),
                          timeout=TIMEOUT, encoding="utf-8")
    child.expect(r"Download it anyway\? \[y/N\] ")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1 and "not downloaded" in child.before
    assert None not in server.ranges
    # --yes downloads it.
    r = run(deskside_bin, "pull", url, "--free", "100KiB", "--yes", env_extra=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "anyway" in r.stderr and r.stdout.strip() == "stories260K-q4_0"
    assert (tmp_path / "store" / "stories260K-q4_0").is_dir()
