"""Two `deskside serve` replicas behind HAProxy with deploy/haproxy/haproxy.cfg, the file docs/DEPLOY.md
tells users to run: requests naming the same prompt_cache_key (or X-Prefix-Key header) reach the same
replica, which then reuses the shared prefix's KV blocks; different keys spread over both; and when a
replica is SIGKILLed mid-run its in-flight requests fail at once (a cut stream, a 502) while new ones,
the dead replica's keys included, are answered by the other; a replica stopped with SIGTERM finishes its
running stream while every new request goes to the other. HAProxy is Debian's package
(scripts/setup.sh installs it); the tests fail, never skip, without it."""
import contextlib
import os
import signal
import shutil
import subprocess
import threading
import time

import httpx
import openai
import pytest
import requests

from serve_helpers import REPO, SHARED, TEMPLATE, Server, free_port

MODEL = SHARED / "models" / "stories260K-q8_0.gguf"
CONFIG = REPO / "deploy" / "haproxy" / "haproxy.cfg"
TIMEOUT = 60  # seconds any single request may take; nothing here should come near it
# A system prompt long enough to fill many 16-position KV blocks, shared by the requests of one key.
SYSTEM = ("You are a storyteller. Every story has a small cat named Tom, a big red ball, a sunny park, "
          "a kind old dog, and a happy ending where all the friends play together until the sun goes down. ") * 4


class Balancer:
    """haproxy -db (foreground, not a daemon) with the shipped config, on a free port."""

    def __init__(self, replicas):
        binary = shutil.which("haproxy") or ("/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else None)
        if binary is None:
            pytest.fail("haproxy is not installed: apt-get install haproxy (scripts/setup.sh lists it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, DESKSIDE_LB_BIND=f"127.0.0.1:{self.port}",
                   DESKSIDE_REPLICA_1=f"127.0.0.1:{replicas[0].port}",
                   DESKSIDE_REPLICA_2=f"127.0.0.1:{replicas[1].port}")
        self.log = open(f"/tmp/deskside-haproxy-{self.port}.log", "w+")
        # One client, so its connections are reused rather than left open by a client per request.
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0, timeout=TIMEOUT)
        self.proc = subprocess.Popen([binary, "-db", "-f", str(CONFIG)], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"haproxy exited with {self.proc.returncode}: {self.read_log()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail("haproxy did not answer /health: " + self.read_log())
            time.sleep(0.05)

    def read_log(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.client.close()


@contextlib.contextmanager
def running_cluster():
    """Two replicas and HAProxy, all stopped on leaving; yields (balancer, {server name: Server})."""
    replicas = []
    try:
        for _ in range(2):
            # --shutdown-grace 60: the drain test's stream finishes well inside it, even sanitized.
            replicas.append(Server(MODEL, "--chat-template", TEMPLATE, "--parallel", 4, "--ctx-size", 2048,
                                   "--shutdown-grace", 60))
        lb = Balancer(replicas)
        try:
            # HAProxy names the servers replica1 and replica2 in the order of DESKSIDE_REPLICA_1/2.
            yield lb, {"replica1": replicas[0], "replica2": replicas[1]}
        finally:
            lb.stop()
    finally:
        for r in replicas:
            r.stop()


@pytest.fixture(scope="module")
def cluster():
    """Shared by the tests that leave both replicas running."""
    with running_cluster() as c:
        yield c


def ask(lb, key, question="Tell me a story.", system=None, **kw):
    """One short chat completion through the balancer; returns (replica name, completion)."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
    raw = lb.client.chat.completions.with_raw_response.create(
        model=MODEL.stem, messages=messages, max_tokens=kw.pop("max_tokens", 4), prompt_cache_key=key, **kw)
    return raw.headers["x-deskside-replica"], raw.parse()


def cached_tokens(server):
    return server.metrics().get("deskside_prompt_tokens_cached_total", 0.0)


def owners(lb, keys):
    return {k: ask(lb, k)[0] for k in keys}


def test_keys_spread_and_stick(cluster):
    lb, _ = cluster
    keys = [f"tenant-{i}" for i in range(12)]
    first = owners(lb, keys)
    assert set(first.values()) == {"replica1", "replica2"}, first
    assert owners(lb, keys) == first  # the same key, the same replica, every time


def test_header_key_routes_like_the_body_field(cluster):
    lb, _ = cluster
    keys = [f"tenant-{i}" for i in range(6)]
    by_field = owners(lb, keys)
    for k in keys:
        r = requests.post(lb.url + "/v1/chat/completions", headers={"X-Prefix-Key": k}, timeout=TIMEOUT,
                          json={"model": MODEL.stem, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        assert r.status_code == 200, r.text
        assert r.headers["x-deskside-replica"] == by_field[k]
    # Both given: the body field wins.
    a = next(k for k in keys if by_field[k] == "replica1")
    b = next(k for k in keys if by_field[k] == "replica2")
    for field, header in ((a, b), (b, a)):
        raw = lb.client.chat.completions.with_raw_response.create(
            model=MODEL.stem, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, prompt_cache_key=field,
            extra_headers={"X-Prefix-Key": header})
        assert raw.headers["x-deskside-replica"] == by_field[field]


def test_shared_prefix_is_reused_on_its_replica(cluster):
    lb, servers = cluster
    owner, _ = ask(lb, "prefix-reuse", "What did Tom find?", SYSTEM)  # the prefix is now in the owner's cache
    other = "replica2" if owner == "replica1" else "replica1"
    before = {name: cached_tokens(s) for name, s in servers.items()}
    name, reply = ask(lb, "prefix-reuse", "Where did the dog sleep?", SYSTEM)
    assert name == owner
    after = {name: cached_tokens(s) for name, s in servers.items()}
    # Every full 16-position block of the system prompt came from the cache (it is ~300 tokens).
    assert after[owner] - before[owner] >= 128, (before, after)
    assert reply.usage.prompt_tokens_details.cached_tokens == after[owner] - before[owner]
    assert after[other] == before[other]


def test_killed_replica_fails_in_flight_requests_and_loses_its_keys():
    with running_cluster() as cluster:
        kill_one_mid_run(*cluster)


def kill_one_mid_run(lb, servers):
    keys = [f"tenant-{i}" for i in range(12)]
    mapping = owners(lb, keys)
    key = keys[0]
    victim_name = mapping[key]
    victim = servers[victim_name]
    survivor = "replica2" if victim_name == "replica1" else "replica1"
    long = {"max_tokens": 1000, "extra_body": {"ignore_eos": True}}

    # A non-streamed request in flight on the victim: it must fail, not hang: HAProxy answers 502, or,
    # where the request came on a reused client connection, closes it as an idle keep-alive close looks.
    outcome = {}

    def blocking():
        try:
            ask(lb, key, **long)
            outcome["result"] = "completed"
        except openai.APIStatusError as e:
            outcome["result"] = e.status_code
        except openai.APIConnectionError:
            outcome["result"] = "connection closed"

    worker = threading.Thread(target=blocking, daemon=True)
    worker.start()
    # And a streamed one that has started sending tokens.
    stream = lb.client.chat.completions.create(
        model=MODEL.stem, messages=[{"role": "user", "content": "Tell me a long story."}], stream=True,
        prompt_cache_key=key, **long)
    chunks = iter(stream)
    next(chunks)
    deadline = time.monotonic() + TIMEOUT
    while victim.metrics().get("deskside_running_sequences", 0) < 2:
        assert time.monotonic() < deadline, "the two long requests never ran together on " + victim_name
        assert worker.is_alive(), outcome
        time.sleep(0.02)

    victim.proc.kill()
    victim.proc.wait(10)
    finish = None
    with pytest.raises((openai.APIError, httpx.HTTPError)):  # the cut stream: an error, not a clean end
        for chunk in chunks:
            finish = chunk.choices[0].finish_reason if chunk.choices else finish
    assert finish is None
    worker.join(TIMEOUT)
    assert not worker.is_alive()
    assert outcome.get("result") in (502, "connection closed"), outcome

    # Right away (before the next health check, too) the victim's keys go to the survivor.
    for k in keys:
        name, reply = ask(lb, k)
        assert name == survivor
        assert reply.choices[0].finish_reason == "length"


def test_sigterm_drains_a_replica_without_losing_a_request():
    """A rolling restart: the stopped replica's running stream completes, and every request sent
    while it drains is answered by the other (HAProxy retries deskside's draining 503 there)."""
    with running_cluster() as (lb, servers):
        keys = [f"tenant-{i}" for i in range(12)]
        mapping = owners(lb, keys)
        key = keys[0]
        stopping = servers[mapping[key]]
        other = "replica2" if mapping[key] == "replica1" else "replica1"
        stream = lb.client.chat.completions.create(
            model=MODEL.stem, messages=[{"role": "user", "content": "Tell me a story."}], stream=True,
            prompt_cache_key=key, max_tokens=200, extra_body={"ignore_eos": True})
        chunks = iter(stream)
        next(chunks)

        stopping.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + TIMEOUT
        while True:  # draining (503), or already done and gone
            try:
                if requests.get(stopping.url + "/health", timeout=5).status_code == 503:
                    break
            except requests.ConnectionError:
                break
            assert time.monotonic() < deadline, "the replica never reported draining"
            time.sleep(0.02)
        for k in keys:  # whether HAProxy's health check has seen the drain yet or not
            name, reply = ask(lb, k)
            assert name == other
            assert reply.choices[0].finish_reason == "length"

        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert finish == ["length"]
        assert stopping.proc.wait(TIMEOUT) == 0
