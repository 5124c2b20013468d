"""--split-hosts: one model across the processes of an MPI job (engine/stage_link.h, docs/DEPLOY.md).

Each test starts `mpirun -np N deskside ... --split-hosts ...` on this machine, and checks that the
greedy tokens are one process's, bit for bit, and that only rank 0 prints. The last test runs the
two ranks in two network namespaces joined by a veth pair, so the ranks can reach each other only
over TCP between two "hosts" (as across machines), never through shared memory.

OpenMPI's own allocations outlive MPI_Finalize, so the sanitized build runs these processes with
LeakSanitizer off (ASAN_OPTIONS detect_leaks=0), these processes only."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import openai
import pytest
import requests

from required import skip_or_fail

MODELS = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "models"
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def mpirun() -> str:
    path = shutil.which("mpirun")
    if not path:
        skip_or_fail("mpirun is not installed (Debian: openmpi-bin; scripts/setup.sh installs it)")
    return path


def mpi_env() -> dict:
    env = dict(os.environ)
    asan = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "detect_leaks=0"
    # Root in containers and CI; the flags below say the rest.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # A container's hwloc may not see its cores as mpirun expects: bind nothing.
    env["OMPI_MCA_hwloc_base_binding_policy"] = "none"
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    return env


def mpi_prefix(mpirun, n, *extra) -> list:
    # TCP between the ranks (as between hosts), on whatever interface the machine has.
    return [mpirun, "-np", str(n), "--oversubscribe", "--mca", "btl", "tcp,self", "-x", "ASAN_OPTIONS", *extra]


def generate_args(binary, model, n_predict=16):
    return [str(binary), "generate", "-m", str(model), "-p", PROMPT, "-n", str(n_predict), "--temp", "0", "--seed", "1",
            "-t", "1", "--json"]


def run_json(cmd, env=None, timeout=120):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    # Only rank 0 prints: one JSON object, one timing line.
    assert len(lines) == 1, out.stdout
    assert out.stderr.count("prompt:") == 1, out.stderr
    return json.loads(lines[0])


@pytest.mark.parametrize("model,ranks,split", [
    ("stories260K-q8_0.gguf", 2, "1,1"),
    ("stories260K-q8_0.gguf", 3, "1,1,1"),  # a middle rank: receives and sends the residual stream
    ("synth-qwen2-q8_0.gguf", 2, "3,1"),
])
def test_generate_matches_one_process(deskside_bin, mpirun, model, ranks, split):
    path = MODELS / model
    one = run_json(generate_args(deskside_bin, path))
    split_run = run_json(mpi_prefix(mpirun, ranks) + generate_args(deskside_bin, path) + ["--split-hosts", split],
                         env=mpi_env())
    assert split_run["prompt_tokens"] == one["prompt_tokens"]
    assert split_run["tokens"] == one["tokens"]
    assert split_run["text"] == one["text"]


def test_split_hosts_needs_as_many_processes(deskside_bin, mpirun):
    out = subprocess.run(generate_args(deskside_bin, MODELS / "stories260K-q8_0.gguf") + ["--split-hosts", "1,1"],
                         capture_output=True, text=True, timeout=60, env=mpi_env())
    assert out.returncode != 0
    assert "mpirun -np 2" in out.stderr


def test_bench_prints_once(deskside_bin, mpirun):
    """`bench` under mpirun: rank 0 alone prints its table (one row per test, pp and tg)."""
    cmd = mpi_prefix(mpirun, 2) + [str(deskside_bin), "bench", "-m", str(MODELS / "stories260K-q8_0.gguf"),
                                   "-p", "16", "-n", "8", "-r", "1", "-t", "1", "--json", "--split-hosts", "1,1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=mpi_env())
    assert out.returncode == 0, out.stderr[-4000:]
    rows = json.loads(out.stdout)
    assert sorted((r["n_prompt"], r["n_gen"]) for r in rows) == [(0, 8), (16, 0)], out.stdout
    assert all(r["avg_ts"] > 0 for r in rows)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`deskside serve` started by `cmd` (one process, or mpirun with --split-hosts)."""

    def __init__(self, cmd, port, env=None):
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, f"serve exited with {self.proc.returncode}: {self.read_log()}"
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "serve did not become healthy: " + self.read_log()
            time.sleep(0.1)

    def read_log(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def smoke(self):
        """A chat completion and a completion, streamed and not, greedy: their texts."""
        client = openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0)
        model = client.models.list().data[0].id
        messages = [{"role": "user", "content": "Tell me a story"}]
        chat = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
        chat_stream = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model=model, messages=messages, max_tokens=12, temperature=0, stream=True) if c.choices)
        text = client.completions.create(model=model, prompt=PROMPT, max_tokens=12, temperature=0)
        text_stream = "".join(c.choices[0].text for c in client.completions.create(
            model=model, prompt=PROMPT, max_tokens=12, temperature=0, stream=True) if c.choices)
        assert chat.choices[0].message.content == chat_stream
        assert text.choices[0].text == text_stream
        assert text.usage.completion_tokens > 0
        return chat_stream, text_stream


def serve_args(binary, port):
    template = MODELS.parent / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    return [str(binary), "serve", "-m", str(MODELS / "stories260K-q8_0.gguf"), "--port", str(port), "-t", "1",
            "--parallel", "2", "--ctx-size", "512", "--chat-template", str(template)]


def test_serve_smoke(deskside_bin, mpirun):
    port = free_port()
    one = Served(serve_args(deskside_bin, port), port)
    try:
        expected = one.smoke()
    finally:
        one.stop()
    port = free_port()
    cmd = mpi_prefix(mpirun, 2) + serve_args(deskside_bin, port) + ["--split-hosts", "1,1"]
    split = Served(cmd, port, env=mpi_env())
    try:
        assert split.smoke() == expected
    finally:
        split.stop()


# ---- two network namespaces ---------------------------------------------------------------------

NET = "10.231.77"


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


@pytest.fixture
def two_hosts(tmp_path):
    """Two network namespaces, A (10.231.77.1) and B (10.231.77.2), joined by a veth pair; and an
    mpirun launcher (plm_rsh_agent) that starts a rank on B inside B. Removed afterwards, always."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        skip_or_fail("network namespaces need root and iproute2")
    tag = f"{os.getpid() % 100000}"
    ns_a, ns_b = f"dsk-a-{tag}", f"dsk-b-{tag}"
    veth_a, veth_b = f"dska{tag}", f"dskb{tag}"
    try:
        sh("ip", "netns", "add", ns_a)
        sh("ip", "netns", "add", ns_b)
        sh("ip", "link", "add", veth_a, "type", "veth", "peer", "name", veth_b)
        for ns, veth, ip in ((ns_a, veth_a, f"{NET}.1"), (ns_b, veth_b, f"{NET}.2")):
            sh("ip", "link", "set", veth, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", veth)
            sh("ip", "-n", ns, "link", "set", veth, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        # mpirun runs this as `agent HOST COMMAND...` for each host that is not its own, as it
        # would run ssh: the command is a shell line for the other host. B gets a hostname of
        # its own too, as a second machine would have.
        agent = tmp_path / "netns-agent.sh"
        agent.write_text("#!/bin/sh\n"
                         "host=$1; shift\n"
                         f"[ \"$host\" = {NET}.2 ] || {{ echo \"unknown host $host\" >&2; exit 1; }}\n"
                         f"exec ip netns exec {ns_b} unshare --uts sh -c \"hostname dsk-host-b; $*\"\n")
        agent.chmod(0o755)
        yield {"ns_a": ns_a, "agent": agent}
    finally:
        # Deleting a namespace deletes the veth end in it; an end not moved yet is deleted here.
        subprocess.run(["ip", "link", "delete", veth_a], capture_output=True, timeout=30)
        for ns in (ns_a, ns_b):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=30)


def test_generate_across_network_namespaces(deskside_bin, mpirun, two_hosts):
    model = MODELS / "stories260K-q8_0.gguf"
    one = run_json(generate_args(deskside_bin, model))
    cmd = ["ip", "netns", "exec", two_hosts["ns_a"]] + mpi_prefix(
        mpirun, 2, "--host", f"{NET}.1,{NET}.2", "--mca", "plm_rsh_agent", str(two_hosts["agent"]),
        "--mca", "btl_tcp_if_include", f"{NET}.0/24", "--mca", "oob_tcp_if_include", f"{NET}.0/24",
    ) + generate_args(deskside_bin, model) + ["--split-hosts", "1,1"]
    split = run_json(cmd, env=mpi_env())
    assert split["tokens"] == one["tokens"]
