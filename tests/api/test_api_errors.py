"""Fail closed: every parameter we cannot honour, every malformed request, gets OpenAI's error
shape with the right status and `param`; the server keeps serving afterwards."""
import openai
import pytest
import requests

from serve_helpers import STORIES

CHAT = {"model": "stories260K", "messages": [{"role": "user", "content": "hi"}]}
COMP = {"model": "stories260K", "prompt": "Once"}


def expect(r, status, param=None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"]
    if param is not None:
        assert err["param"] == param
    return err


@pytest.mark.parametrize("extra,param", [
    ({"tools": [{"type": "function", "function": {"name": "f", "returns": "x"}}]}, "tools[0].function.returns"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "response_format.json_schema.name"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "contentMediaType": "x"}}}}}},
     "response_format.json_schema.schema.properties.a.contentMediaType"),
    ({"audio": {"voice": "alloy"}}, "audio"),
    ({"modalities": ["audio"]}, "modalities"),
    ({"unknown_thing": 1}, "unknown_thing"),
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"n": 0}, "n"),
    ({"max_tokens": -1}, "max_tokens"),
    ({"stop": 5}, "stop"),
    ({"logit_bias": {"abc": 1}}, "logit_bias.abc"),
    ({"top_logprobs": 50, "logprobs": True}, "top_logprobs"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": "hi"}, "messages"),
])
def test_chat_rejections(stories, extra, param):
    expect(stories.post("/v1/chat/completions", dict(CHAT, **extra)), 400, param)


@pytest.mark.parametrize("extra,param", [
    ({"suffix": "x"}, "suffix"),
    ({"best_of": 3}, "best_of"),
    ({"prompt": [1, 100000]}, "prompt[1]"),
    ({"prompt": {"a": 1}}, "prompt"),
    ({"logprobs": 40}, "logprobs"),
    ({"echo": "yes"}, "echo"),
    ({"metadata": {}}, "metadata"),
])
def test_completion_rejections(stories, extra, param):
    expect(stories.post("/v1/completions", dict(COMP, **extra)), 400, param)


def test_malformed_and_unknown(stories):
    expect(stories.post("/v1/chat/completions", data="{not json"), 400)
    expect(stories.post("/v1/chat/completions", data="[1,2]"), 400)
    expect(stories.post("/v1/completions", {"prompt": "x"}), 400, "model")
    expect(stories.post("/v1/completions", dict(COMP, model="gpt-4")), 404, "model")
    expect(stories.get("/v1/nothing"), 404)
    # The official client raises its typed errors on these.
    with pytest.raises(openai.BadRequestError):
        stories.client().chat.completions.create(model="stories260K", messages=CHAT["messages"], tools=[
            {"type": "function", "function": {"name": "not a name", "parameters": {}}}])
    with pytest.raises(openai.NotFoundError):
        stories.client().completions.create(model="nope", prompt="x")
    assert stories.get("/health").status_code == 200


@pytest.fixture(scope="module")
def small(start_server):
    return start_server(STORIES, "--ctx-size", 64, "--max-body", 2000)


def test_prompt_longer_than_context(small):
    err = expect(small.post("/v1/completions", {"model": "stories260K", "prompt": [1] + [300] * 80}), 400, "prompt")
    assert "64" in err["message"] and "81" in err["message"]


def test_max_tokens_beyond_context_is_400_naming_both(small):
    """OpenAI's rule: prompt + max_tokens must fit the context (not a 200 cut short)."""
    r = small.post("/v1/completions", {"model": "stories260K", "prompt": [1] + [300] * 59, "max_tokens": 100})
    err = expect(r, 400, "max_tokens")
    assert err["code"] == "context_length_exceeded"
    assert "160" in err["message"] and "60 in the prompt" in err["message"]
    # Exactly the context fits, and runs to its end.
    out = small.client().completions.create(model="stories260K", prompt=[1] + [300] * 39, max_tokens=24,
                                            logit_bias={"2": -100})
    assert out.choices[0].finish_reason == "length"
    assert out.usage.prompt_tokens + out.usage.completion_tokens == 64


def test_body_too_large(small):
    r = small.post("/v1/completions", {"model": "stories260K", "prompt": "x" * 5000})
    expect(r, 413)


def test_api_key(start_server):
    s = start_server(STORIES, api_key="sekrit-key")
    ok = s.client().completions.create(model="stories260K", prompt="Once", max_tokens=2)
    assert ok.choices
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0).models.list()
    r = requests.get(s.url + "/v1/models")
    expect(r, 401)
    assert requests.get(s.url + "/health").status_code == 200
