"""`deskside env`: the stack fingerprint has every field issue #20 names, `--compare` classifies an
ISA change as result-changing (exit 1) and a thread-count change as speed only (exit 0), and the
server serves the same fingerprint at GET /v1/deskside/env (behind --api-key) and as the
deskside_build_info gauge on /metrics."""
import hashlib
import json
import os
import pathlib
import subprocess
import sys

import requests

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "api"))
from serve_helpers import Server  # noqa: E402

MODEL = REPO.parent / "shared" / "models" / "stories260K-q8_0.gguf"


def env(deskside_bin, *args, extra_env=None):
    return subprocess.run([str(deskside_bin), "env", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(extra_env or {})})


def fingerprint(deskside_bin, *args, extra_env=None):
    r = env(deskside_bin, "--json", *args, extra_env=extra_env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def check_fields(f):
    assert f["schema"] == 1
    d = f["deskside"]
    assert d["version"] and d["commit"]  # a hex commit, or "unknown" outside a git checkout
    assert isinstance(d["dirty"], bool) and d["build_type"]
    assert set(d["options"]) == {"vulkan", "cuda", "native", "sanitize", "cuda_architectures"}
    assert f["compiler"]["cxx"].split()[0] in ("gcc", "clang")
    assert set(f["os"]) == {"name", "kernel", "arch", "glibc"} and f["os"]["kernel"] and f["os"]["glibc"]
    assert f["isa"] in ("scalar", "avx2", "avx512")
    assert f["threads"] >= 1
    cpu = f["cpu"]
    assert cpu["model"] and cpu["memory_bytes"] > 0 and cpu["cores"] >= 1 and "max_mhz" in cpu
    assert cpu["isa_best"] in ("scalar", "avx2", "avx512")
    for dev in f["devices"]:
        for key in ("name", "api", "description", "memory_bytes", "driver", "driver_version", "runtime_version",
                    "api_version", "kernels"):
            assert key in dev, (key, dev)
        if dev["api"] == "vulkan":  # lavapipe here: the driver names itself, the kernels say exact or plain
            assert dev["driver"] and dev["driver_version"] and dev["api_version"].startswith("1.")
            assert dev["kernels"][0] in ("exact", "plain")
            assert any(k.startswith("subgroup=") for k in dev["kernels"])
        if dev["api"] == "cuda":
            assert dev["driver_version"] and dev["runtime_version"]
    apis = {dev["api"] for dev in f["devices"]} | set(f["absent"])
    assert {"vulkan", "cuda"} <= apis  # each API either lists devices or says why it has none


def test_env_json_names_every_field(deskside_bin):
    f = fingerprint(deskside_bin)
    check_fields(f)
    assert "model" not in f
    assert fingerprint(deskside_bin, "-t", 3)["threads"] == 3
    text = env(deskside_bin)
    assert text.returncode == 0 and "isa" in text.stdout and "compiler" in text.stdout


def test_env_isa_is_the_pinned_level(deskside_bin):
    assert fingerprint(deskside_bin, extra_env={"DESKSIDE_CPU_ISA": "scalar"})["isa"] == "scalar"
    bad = env(deskside_bin, "--json", extra_env={"DESKSIDE_CPU_ISA": "sse9"})
    assert bad.returncode == 1 and "DESKSIDE_CPU_ISA=sse9" in bad.stderr


def test_env_model_digest_and_types(deskside_bin):
    m = fingerprint(deskside_bin, "-m", MODEL)["model"]
    assert m["sha256"] == hashlib.sha256(MODEL.read_bytes()).hexdigest()
    assert m["size_bytes"] == MODEL.stat().st_size
    types = {q["type"] for q in m["quant_types"]}
    assert "q8_0" in types and "f32" in types


def test_compare_classifies_and_sets_the_exit_status(deskside_bin, tmp_path):
    desk = fingerprint(deskside_bin)
    a = tmp_path / "desk.json"
    a.write_text(json.dumps(desk))

    other_isa = "scalar" if desk["isa"] != "scalar" else "avx2"
    b = tmp_path / "isa.json"
    b.write_text(json.dumps({**desk, "isa": other_isa}))
    r = env(deskside_bin, "--compare", a, b)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "results  isa: " + desk["isa"] + " -> " + other_isa in r.stdout

    c = tmp_path / "threads.json"
    c.write_text(json.dumps({**desk, "threads": desk["threads"] + 7}))
    r = env(deskside_bin, "--compare", a, c)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "speed    threads" in r.stdout

    r = env(deskside_bin, "--compare", b, c, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 1 and out["changes_results"]
    assert {(d["field"], d["class"]) for d in out["differences"]} == {("isa", "results"), ("threads", "speed")}

    # Against this machine: the saved desk is this machine, at another thread count.
    r = env(deskside_bin, "--compare", a, "-t", desk["threads"] + 1)
    assert r.returncode == 0, r.stdout + r.stderr
    r = env(deskside_bin, "--compare", b)
    assert r.returncode == 1 and "isa" in r.stdout

    assert env(deskside_bin, "--compare", tmp_path / "missing.json").returncode == 1
    assert env(deskside_bin, "--compare", a, b, c).returncode == 2


def test_server_serves_the_fingerprint_behind_the_key(deskside_bin):
    os.environ.setdefault("DESKSIDE_BUILD", str(pathlib.Path(deskside_bin).parent))
    server = Server(MODEL, "--devices", "cpu", "-t", 2, api_key="sekrit")
    try:
        assert requests.get(server.url + "/v1/deskside/env", timeout=30).status_code == 401
        r = server.get("/v1/deskside/env")
        assert r.status_code == 200, r.text
        f = r.json()
        check_fields(f)
        assert f["threads"] == 2
        assert f["model"]["sha256"] == hashlib.sha256(MODEL.read_bytes()).hexdigest()
        metrics = requests.get(server.url + "/metrics", timeout=30).text
        gauge = [line for line in metrics.splitlines() if line.startswith("deskside_build_info{")]
        assert len(gauge) == 1 and gauge[0].endswith("} 1")
        assert f'isa="{f["isa"]}"' in gauge[0] and 'threads="2"' in gauge[0]
        assert f'commit="{f["deskside"]["commit"]}"' in gauge[0]
        assert "# TYPE deskside_build_info gauge" in metrics
    finally:
        server.stop()
