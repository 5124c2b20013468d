"""Prefix reuse from a sequence that is still running, and a client that disconnects during a
non-streamed request. Each test starts its own server so that no idle slot holds a prefix and
the counters start at zero."""
import json
import socket
import threading

import requests

from serve_helpers import STORIES
from test_api_serving import wait_for

SYSTEM = ("You are a storyteller for small children. Every story has a little girl named Lily, her dog Max and a "
          "big red ball. The stories are short, happy and use simple words. Lily likes to play in the park with "
          "her friends, and Max likes to run after the ball. One day the sun was shining and the birds were "
          "singing in the trees. ") * 3
BAN_EOS = {"2": -100}  # stories260K's end-of-sequence token: the first request runs to its max_tokens


def complete(server, prompt, **kw):
    r = server.post("/v1/completions", dict(model="stories260K", prompt=prompt, temperature=0, **kw))
    assert r.status_code == 200, r.text
    return r.json()


def stream(server, prompt, out, **kw):
    """Streams into out["text"], sets out["first"] at the first text chunk and out["done"] at the end."""
    body = dict(model="stories260K", prompt=prompt, temperature=0, stream=True, **kw)
    with requests.post(server.url + "/v1/completions", json=body, stream=True, timeout=300) as r:
        text, finish = "", None
        for line in r.iter_lines():
            if not line or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            text += chunk["choices"][0]["text"]
            finish = chunk["choices"][0]["finish_reason"] or finish
            out["first"].set()
        out["text"], out["finish"] = text, finish
        out["done"].set()


def test_second_request_reuses_the_running_sequences_prefix(stories, start_server):
    p1, p2 = SYSTEM + "Lily said", SYSTEM + "Max saw"
    t1 = stories.post("/tokenize", {"content": p1, "add_special": True}).json()["tokens"]
    t2 = stories.post("/tokenize", {"content": p2, "add_special": True}).json()["tokens"]
    shared = next(i for i, (a, b) in enumerate(zip(t1, t2)) if a != b)
    assert shared > 100
    # Alone, on the fixture's server.
    alone1 = complete(stories, p1, max_tokens=400, logit_bias=BAN_EOS)["choices"][0]["text"]
    alone2 = complete(stories, p2, max_tokens=20)["choices"][0]["text"]

    s = start_server(STORIES, "--parallel", 2, "--ctx-size", 2048)
    out = {"first": threading.Event(), "done": threading.Event()}
    th = threading.Thread(target=stream, args=(s, p1, out), kwargs=dict(max_tokens=400, logit_bias=BAN_EOS))
    th.start()
    assert out["first"].wait(120)  # generating: its whole prompt is in the KV cache
    second = complete(s, p2, max_tokens=20)
    first_still_running = not out["done"].is_set()
    th.join()
    assert first_still_running, "the first request ended before the second one: nothing was shared while running"
    # The other slot was empty: every cached token came from the running sequence.
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == shared
    assert second["choices"][0]["text"] == alone2
    assert out["text"] == alone1 and out["finish"] == "length"
    assert s.metrics()["deskside_prompt_tokens_cached_total"] == shared


def test_disconnect_during_non_streamed_request_frees_its_blocks(start_server):
    s = start_server(STORIES, "--parallel", 1, "--ctx-size", 2048)
    body = json.dumps({"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 2000,
                       "logit_bias": BAN_EOS}).encode()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\n\r\n" + body)
    assert wait_for(lambda: s.metrics()["deskside_generated_tokens_total"] >= 20)
    assert s.metrics()["deskside_kv_cache_blocks_used"] > 0
    sock.close()
    assert wait_for(lambda: s.metrics()["deskside_running_sequences"] == 0)
    m = s.metrics()
    assert m["deskside_generated_tokens_total"] < 2000
    assert m["deskside_kv_cache_blocks_used"] == 0
    assert m['deskside_requests_total{route="/v1/completions",status="499"}'] == 1
    # The server goes on serving.
    assert complete(s, "Once upon a time", max_tokens=5)["usage"]["completion_tokens"] == 5


def test_vllm_tokenizer_routes_match_llama_cpp(stories, reference):
    """lm-evaluation-harness's remote tokenizer speaks vLLM's shapes; the ids are llama.cpp's."""
    info = stories.get("/tokenizer_info").json()
    assert info["bos_token"] == "<s>" and info["eos_token"] == "</s>"
    case = reference["cases"][0]
    r = stories.post("/tokenize", {"prompt": case["prompt"], "model": "stories260K"}).json()
    assert r["tokens"] == case["prompt_tokens"] and r["count"] == len(case["prompt_tokens"])
    r = stories.post("/tokenize", {"prompt": case["prompt"], "add_special_tokens": False}).json()
    assert r["tokens"] == case["prompt_tokens"][1:]
    assert stories.post("/tokenize", {"prompt": "<s>" + case["prompt"], "add_special_tokens": False}).json()["tokens"] \
        == case["prompt_tokens"]
    assert stories.post("/detokenize", {"tokens": case["prompt_tokens"][1:]}).json()["prompt"] == case["prompt"]
    bad = stories.post("/tokenize", {"prompt": "x", "add_special": True})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "add_special"


def test_ignore_eos_runs_to_max_tokens(stories):
    """vLLM's and llama.cpp's ignore_eos (benchmarks use it): the same as banning the EOS token."""
    banned = complete(stories, "Once upon a time", max_tokens=300, logit_bias=BAN_EOS)
    ignored = complete(stories, "Once upon a time", max_tokens=300, ignore_eos=True)
    assert ignored["choices"][0]["finish_reason"] == "length" and ignored["usage"]["completion_tokens"] == 300
    assert ignored["choices"][0]["text"] == banned["choices"][0]["text"]
    bad = stories.post("/v1/completions", {"model": "stories260K", "prompt": "x", "ignore_eos": 1})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "ignore_eos"
