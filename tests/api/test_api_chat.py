"""/v1/chat/completions with a chat template given on the command line (stories260K has none)."""
import pytest

from serve_helpers import SHARED, STORIES, find_gemma, models_required, skip_or_fail

MSGS = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Tell me about a cat."}]


def test_chat_stream_equals_non_stream(stories):
    c = stories.client()
    whole = c.chat.completions.create(model="stories260K", messages=MSGS, max_tokens=30, temperature=0)
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].finish_reason in ("stop", "length")
    chunks = list(c.chat.completions.create(model="stories260K", messages=MSGS, max_tokens=30, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == whole.usage.total_tokens


def test_chat_content_parts_and_roles(stories):
    c = stories.client()
    parts = [{"role": "developer", "content": [{"type": "text", "text": "You tell "}, {"type": "text", "text": "stories."}]},
             MSGS[1]]
    a = c.chat.completions.create(model="stories260K", messages=parts, max_completion_tokens=10, temperature=0)
    b = c.chat.completions.create(model="stories260K", messages=MSGS, max_completion_tokens=10, temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == b.usage.prompt_tokens
    c.chat.completions.create(model="stories260K", max_tokens=5, user="u", metadata={"k": "v"},
                              response_format={"type": "text"},
                              messages=MSGS + [{"role": "assistant", "content": "Once"}, {"role": "user", "content": "more"}])


def test_chat_n_and_logprobs(stories):
    c = stories.client()
    out = c.chat.completions.create(model="stories260K", messages=MSGS, max_tokens=6, temperature=1.0, seed=3, n=2,
                                    logprobs=True, top_logprobs=2)
    assert len(out.choices) == 2
    for ch in out.choices:
        content = ch.logprobs.content
        assert len(content) == out.usage.completion_tokens // 2 or ch.finish_reason == "stop"
        for t in content:
            assert t.logprob <= 0 and len(t.top_logprobs) == 2
            assert bytes(t.bytes).decode("utf-8", "replace") == t.token
    assert "".join(t.token for t in out.choices[0].logprobs.content) == out.choices[0].message.content


def test_prefix_reuse_reports_cached_tokens(stories):
    c = stories.client()
    long = [{"role": "user", "content": "Tell me a story about a dog and a cat who lived in a big red house. " * 4}]
    first = c.chat.completions.create(model="stories260K", messages=long, max_tokens=4, temperature=0)
    second = c.chat.completions.create(model="stories260K", messages=long, max_tokens=4, temperature=0)
    assert second.usage.prompt_tokens_details.cached_tokens == second.usage.prompt_tokens - 1
    assert first.choices[0].message.content == second.choices[0].message.content


def test_no_template_is_a_clear_400(start_server):
    s = start_server(STORIES)
    r = s.post("/v1/chat/completions", {"model": "stories260K", "messages": MSGS})
    assert r.status_code == 400
    assert "chat template" in r.json()["error"]["message"]




@pytest.fixture(scope="module")
def gemma(start_server):
    path = find_gemma()
    if path is None:
        skip_or_fail("gemma-3-270m not found under ~/.cache/deskside (scripts/fetch-gemma3-270m.sh fetches it)",
                     models_required())
    # This GGUF carries no chat template; Gemma 3 uses Gemma 2's turn format.
    return start_server(path, "--parallel", 4, "--ctx-size", 1024, "--chat-template",
                        str(SHARED / "templates" / "google-gemma-2-2b-it.jinja"))


def test_gemma3_real_template(gemma):
    """The prompt is the template rendered by Python's jinja2 (the reference renderer), tokenized
    with control tokens recognised; chat must generate exactly what /v1/completions generates
    from those ids, streamed or not."""
    import jinja2
    c = gemma.client()
    msgs = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = lambda m: (_ for _ in ()).throw(Exception(m))
    text = env.from_string(open(str(SHARED / "templates" / "google-gemma-2-2b-it.jinja")).read()).render(
        messages=msgs, add_generation_prompt=True, bos_token="<bos>", eos_token="<eos>")
    ids = gemma.post("/tokenize", {"content": text, "parse_special": True}).json()["tokens"]
    assert ids[0] == 2 and ids.count(2) == 1  # one BOS, written by the template
    whole = c.chat.completions.create(model=gemma.model_id, messages=msgs, max_tokens=16, temperature=0)
    assert whole.usage.prompt_tokens == len(ids)
    plain = c.completions.create(model=gemma.model_id, prompt=ids, max_tokens=16, temperature=0)
    assert whole.choices[0].message.content == plain.choices[0].text
    assert whole.choices[0].finish_reason == plain.choices[0].finish_reason
    streamed = "".join(ch.choices[0].delta.content or "" for ch in
                       c.chat.completions.create(model=gemma.model_id, messages=msgs, max_tokens=16, temperature=0, stream=True))
    assert streamed == whole.choices[0].message.content
