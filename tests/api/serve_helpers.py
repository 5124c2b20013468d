"""Helpers for the HTTP API suites: start `deskside serve` on a free port, wait for /health,
hand out an official `openai` client, stop the server afterwards. (A module of its own, not
conftest.py, so that tests can import it next to tests/py/conftest.py.)"""
import json
import os
import pathlib
import signal
import socket
import subprocess
import time

import openai
import pytest
import requests

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"  # ../shared beside the checkout
STORIES = SHARED / "models" / "stories260K.gguf"
TEMPLATE = SHARED / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
GEMMA_DIR = pathlib.Path(os.environ.get("DESKSIDE_CACHE", pathlib.Path.home() / ".cache" / "deskside"))
# DESKSIDE_TEST_DEVICES=vulkan0 (any --devices list) runs every server the suites start on those
# devices, unless a test passes --devices itself: the whole API suite against another backend.
TEST_DEVICES = os.environ.get("DESKSIDE_TEST_DEVICES", "")


def deskside_binary() -> pathlib.Path:
    return pathlib.Path(os.environ.get("DESKSIDE_BUILD", REPO / "build")) / "deskside"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `deskside serve`; .url, .client(), .get/.post (raw HTTP), .stop()."""

    def __init__(self, model, *args, api_key=None, env=None):
        binary = deskside_binary()
        if not binary.exists():
            pytest.fail(f"{binary} is not built (set DESKSIDE_BUILD)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        cmd = [str(binary), "serve", "-m", str(model), "--port", str(self.port), *map(str, args)]
        if TEST_DEVICES and "--devices" not in cmd:
            cmd += ["--devices", TEST_DEVICES]
        if api_key:
            cmd += ["--api-key", api_key]
        self.log = open(f"/tmp/deskside-serve-{self.port}.log", "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"deskside serve exited with {self.proc.returncode}: {self.read_log()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail("deskside serve did not become healthy: " + self.read_log())
            time.sleep(0.05)
        self.model_id = requests.get(self.url + "/v1/models", headers=self.headers()).json()["data"][0]["id"]

    def headers(self):
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "none", max_retries=0, **kw)

    def post(self, path, body=None, data=None, headers=None):
        h = dict(self.headers(), **(headers or {}))
        if data is not None:
            return requests.post(self.url + path, data=data, headers=h, timeout=120)
        return requests.post(self.url + path, json=body, headers=h, timeout=120)

    def get(self, path):
        return requests.get(self.url + path, headers=self.headers(), timeout=30)

    def metrics(self):
        out = {}
        for line in self.get("/metrics").text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def rss_kib(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def read_log(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode



def started_servers():
    """The body of a session fixture: yields start(model, *flags, api_key=None) -> Server, then
    stops every server it started."""
    started = []

    def start(model, *args, api_key=None, env=None):
        s = Server(model, *args, api_key=api_key, env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def has_device(name) -> bool:
    """Whether `deskside devices --json` lists `name` as usable (DESKSIDE_VULKAN_SPLIT applies)."""
    out = subprocess.run([str(deskside_binary()), "devices", "--json"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return False
    return any(d.get("name") == name and d.get("usable", False) for d in json.loads(out.stdout).get("devices", []))


def skip_or_fail(reason, required):
    """Skips, saying why; fails where the run must be complete (`required`: CI=true, as CI sets it,
    DESKSIDE_REQUIRE_MODELS, or the device named in DESKSIDE_REQUIRE_DEVICES), as
    tests/py/required.py does, so that a CI run cannot pass by skipping."""
    if required:
        pytest.fail(f"{reason} (a complete run is required here)")
    pytest.skip(reason)


def models_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("DESKSIDE_REQUIRE_MODELS", "") not in ("", "0")


def device_required(name) -> bool:
    return name in [d.strip() for d in os.environ.get("DESKSIDE_REQUIRE_DEVICES", "").split(",")]


def find_gemma():
    if not GEMMA_DIR.exists():
        return None
    for p in sorted(GEMMA_DIR.rglob("*.gguf")):
        if "gemma" in p.name.lower() and "270m" in p.name.lower():
            return p
    return None
