"""/v1/completions through the official openai client, checked against llama.cpp's greedy
outputs for stories260K (../shared/reference/stories260K.json)."""
import math

from serve_helpers import SHARED

import pytest


def test_models_list_and_get(stories):
    c = stories.client()
    models = c.models.list().data
    assert [m.id for m in models] == ["stories260K"]
    assert c.models.retrieve("stories260K").id == "stories260K"
    r = stories.get("/v1/models/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "model_not_found"


def test_health(stories):
    r = stories.get("/health")
    assert r.status_code == 200


@pytest.mark.parametrize("case", range(5))
def test_greedy_matches_llama_cpp(stories, reference, case):
    ref = reference["cases"][case]
    c = stories.client()
    out = c.completions.create(model="stories260K", prompt=ref["prompt_tokens"], max_tokens=len(ref["greedy_tokens"]),
                               temperature=0)
    assert out.choices[0].text == ref["greedy_text"]
    assert out.usage.prompt_tokens == len(ref["prompt_tokens"])
    assert out.usage.completion_tokens == len(ref["greedy_tokens"])
    # The text prompt tokenizes to the same ids (BOS added) and gives the same text.
    out = c.completions.create(model="stories260K", prompt=ref["prompt"], max_tokens=len(ref["greedy_tokens"]),
                               temperature=0)
    assert out.choices[0].text == ref["greedy_text"]
    assert out.usage.prompt_tokens == len(ref["prompt_tokens"])


def test_stream_joins_to_the_same_text(stories, reference):
    c = stories.client()
    prompt = reference["cases"][1]["prompt"]
    whole = c.completions.create(model="stories260K", prompt=prompt, max_tokens=40, temperature=0)
    chunks = list(c.completions.create(model="stories260K", prompt=prompt, max_tokens=40, temperature=0, stream=True,
                                       stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == whole.choices[0].text
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]


def test_multiple_prompts_and_n(stories, reference):
    c = stories.client()
    prompts = [reference["cases"][0]["prompt"], reference["cases"][2]["prompt"]]
    out = c.completions.create(model="stories260K", prompt=prompts, max_tokens=8, temperature=0, n=2)
    assert [ch.index for ch in out.choices] == [0, 1, 2, 3]
    assert out.choices[0].text == out.choices[1].text  # greedy: the same twice
    assert out.choices[0].text != out.choices[2].text
    assert out.usage.prompt_tokens == len(reference["cases"][0]["prompt_tokens"]) + len(reference["cases"][2]["prompt_tokens"])


def test_stop_string(stories, reference):
    ref = reference["cases"][0]
    c = stories.client()
    out = c.completions.create(model="stories260K", prompt=ref["prompt"], max_tokens=64, temperature=0, stop=["Lily"])
    assert out.choices[0].text == ref["greedy_text"].split("Lily")[0]
    assert out.choices[0].finish_reason == "stop"
    out = c.completions.create(model="stories260K", prompt=ref["prompt"], max_tokens=64, temperature=0,
                               stop=["zzz", "park"], stream=True)
    assert "".join(ch.choices[0].text for ch in out) == ref["greedy_text"].split("park")[0]


def test_seed_reproducible(stories):
    c = stories.client()
    a = c.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=30, temperature=1.0, seed=7)
    b = c.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=30, temperature=1.0, seed=7)
    d = c.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=30, temperature=1.0, seed=8)
    assert a.choices[0].text == b.choices[0].text
    assert a.choices[0].text != d.choices[0].text


def test_echo_logprobs_score_the_prompt(stories, reference):
    """max_tokens 0 + echo + logprobs is how lm-evaluation-harness scores log-likelihoods; the
    scores must match llama.cpp's logits for the same tokens."""
    import numpy as np
    ref = reference["cases"][0]
    ids = ref["prompt_tokens"] + ref["greedy_tokens"][:10]
    out = stories.client().completions.create(model="stories260K", prompt=ids, max_tokens=0, echo=True, logprobs=1)
    lp = out.choices[0].logprobs
    assert out.choices[0].text.endswith(stories.post("/detokenize", {"tokens": ids[1:]}).json()["content"].lstrip())
    assert len(lp.tokens) == len(ids) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    assert lp.token_logprobs[0] is None
    logits = np.fromfile(str(SHARED / "reference" / reference["logits_file"]), dtype=np.float32)
    rows = logits[ref["logits_offset_bytes"] // 4:].reshape(-1, reference["n_vocab"])
    for i in range(1, len(ids)):
        row = rows[i - 1].astype(np.float64)
        expected = row[ids[i]] - (row.max() + math.log(np.exp(row - row.max()).sum()))
        assert lp.token_logprobs[i] == pytest.approx(expected, abs=2e-3)
        assert len(lp.top_logprobs[i]) == 1
    assert out.usage.completion_tokens == 0


def test_generation_logprobs_agree_with_echo(stories):
    c = stories.client()
    gen = c.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=12, temperature=0, logprobs=3)
    lp = gen.choices[0].logprobs
    assert len(lp.tokens) == 12 == gen.usage.completion_tokens
    assert all(len(t) == 3 for t in lp.top_logprobs)
    # Greedy: the chosen token is the most likely one.
    for tok, tlp, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert tlp == pytest.approx(max(top.values()), abs=1e-6)
    ids = stories.post("/tokenize", {"content": "Once upon a time" + gen.choices[0].text, "add_special": True}).json()["tokens"]
    echo = c.completions.create(model="stories260K", prompt=ids, max_tokens=0, echo=True, logprobs=0)
    n_prompt = gen.usage.prompt_tokens
    if echo.choices[0].logprobs.tokens[n_prompt:] == lp.tokens:
        assert echo.choices[0].logprobs.token_logprobs[n_prompt:] == pytest.approx(lp.token_logprobs, abs=1e-4)


def test_tokenize_roundtrip(stories):
    toks = stories.post("/tokenize", {"content": "Once upon a time", "add_special": True}).json()["tokens"]
    assert toks == [1, 403, 407, 261, 378]
    assert stories.post("/detokenize", {"tokens": toks[1:]}).json()["content"] == "Once upon a time"
