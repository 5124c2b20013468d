"""One generation loop (engine/engine_loop.h) under `deskside generate`, `deskside chat` and
`deskside serve`: the same prompt and settings give the same text through all three, greedy and
sampled with a seed; the sampler extras vLLM and llama.cpp accept change the output and are
range-checked; OpenAI's context rule; fill-in-the-middle needs FIM tokens."""
import json
import re
import subprocess

import pexpect

from serve_helpers import STORIES, TEMPLATE, deskside_binary

PROMPT = "Once upon a time, there was a little dog"
# The CLI's sampler defaults are llama.cpp's (top-k 40, top-p 0.95, min-p 0.05); the API's are
# OpenAI's (off). These flags make them the same settings.
PLAIN = ["--top-k", "0", "--top-p", "1", "--min-p", "0"]


def generate(*flags):
    r = subprocess.run([str(deskside_binary()), "generate", "-m", str(STORIES), "-p", PROMPT, "--json", "-t", "1",
                        *map(str, flags)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_generate_and_serve_give_the_same_text(stories):
    for temp, seed in ((0, 0), (1.0, 5), (0.7, 123)):
        cli = generate("-n", 40, "--temp", temp, "--seed", seed, *PLAIN)
        api = stories.client().completions.create(model="stories260K", prompt=PROMPT, max_tokens=40, temperature=temp,
                                                  seed=seed)
        assert api.choices[0].text == cli["text"], (temp, seed)
        assert api.usage.completion_tokens == len(cli["tokens"])


def test_chat_and_serve_give_the_same_answer(stories):
    child = pexpect.spawn(str(deskside_binary()), ["chat", "-m", str(STORIES), "--chat-template", str(TEMPLATE),
                                                   "--temp", "0", "-n", "30", "-t", "1"],
                          encoding="utf-8", timeout=120, dimensions=(50, 400))
    child.expect("> ")
    child.sendline("Tell me about Lily")
    child.expect(r"\[(\d+) tokens")
    streamed = child.before.split("Tell me about Lily", 1)[-1].replace("\r", "")
    streamed = re.sub(r"\x1b\[[0-9;]*m", "", streamed)  # the dimmed stats line's colour
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    api = stories.client().chat.completions.create(model="stories260K", max_tokens=30, temperature=0,
                                                   messages=[{"role": "user", "content": "Tell me about Lily"}])
    assert streamed.strip() == api.choices[0].message.content.strip()


def test_sampler_extras_are_honoured_and_checked(stories):
    c = stories.client()
    base = dict(model="stories260K", prompt=PROMPT, max_tokens=30, temperature=1.0, seed=11)
    free = c.completions.create(**base).choices[0].text
    # top_k 1 is greedy whatever the temperature.
    greedy = c.completions.create(**{**base, "temperature": 0}).choices[0].text
    assert c.completions.create(**base, extra_body={"top_k": 1}).choices[0].text == greedy
    # min_p 1 keeps only the most likely token: greedy too.
    assert c.completions.create(**base, extra_body={"min_p": 1.0}).choices[0].text == greedy
    # A strong repetition penalty changes a greedy continuation that repeats itself.
    rep = c.completions.create(**{**base, "temperature": 0, "max_tokens": 60},
                               extra_body={"repetition_penalty": 2.0}).choices[0].text
    assert rep != c.completions.create(**{**base, "temperature": 0, "max_tokens": 60}).choices[0].text
    typical = c.completions.create(**base, extra_body={"typical_p": 0.2}).choices[0].text
    assert typical and free
    for field, value in (("top_k", -2), ("min_p", 1.5), ("typical_p", 0), ("repetition_penalty", 0), ("top_k", 1.5)):
        r = stories.post("/v1/completions", {"model": "stories260K", "prompt": "x", field: value})
        assert r.status_code == 400 and r.json()["error"]["param"] == field, (field, value, r.text)


def test_prompt_plus_max_tokens_beyond_the_context_is_400(start_server):
    s = start_server(STORIES, "--ctx-size", 64, "--parallel", 1)
    r = s.post("/v1/completions", {"model": "stories260K", "prompt": PROMPT, "max_tokens": 60})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "context_length_exceeded" and err["param"] == "max_tokens"
    assert "64" in err["message"] and "60 for the completion" in err["message"]
    ok = s.post("/v1/completions", {"model": "stories260K", "prompt": PROMPT, "max_tokens": 20})
    assert ok.status_code == 200


def test_suffix_needs_fim_tokens(stories):
    r = stories.post("/v1/completions", {"model": "stories260K", "prompt": "def f(", "suffix": "\n", "max_tokens": 4})
    assert r.status_code == 400 and r.json()["error"]["param"] == "suffix"
    assert "fill-in-the-middle" in r.json()["error"]["message"]
    r = stories.post("/v1/completions", {"model": "stories260K", "prompt": "x", "suffix": "y", "echo": True})
    assert r.status_code == 400 and r.json()["error"]["param"] == "suffix"


def test_control_tokens_in_a_completion_prompt_are_text_unless_parse_special(stories, start_server):
    s = start_server(STORIES, "--parse-special")
    a = s.client().completions.create(model="stories260K", prompt="Once</s>", max_tokens=1, logprobs=0, echo=True)
    b = stories.client().completions.create(model="stories260K", prompt="Once</s>", max_tokens=1, logprobs=0, echo=True)
    assert len(a.choices[0].logprobs.tokens) < len(b.choices[0].logprobs.tokens)
