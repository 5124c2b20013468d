"""Structured outputs and reasoning through the official openai client: response_format
json_object / json_schema by grammar-constrained sampling (checked with the `jsonschema`
package, which we did not write), `client.chat.completions.parse()` with a pydantic model,
streamed and not; reasoning_content split from <think> blocks; chat_template_kwargs and
reasoning_effort reach the template (or are refused)."""
import datetime
import json
from typing import List, Literal

import jinja2
import jsonschema
import pydantic
import pytest

from serve_helpers import SHARED, STORIES

TEMPLATES = SHARED / "templates"


class Pet(pydantic.BaseModel):
    kind: Literal["cat", "dog", "bird"]
    name: str = pydantic.Field(max_length=12)


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=16)
    age: int = pydantic.Field(ge=0, le=120)
    pets: List[Pet] = pydantic.Field(max_length=3)
    nickname: str | None = pydantic.Field(max_length=10)


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 20},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 4},
        "score": {"type": "integer", "minimum": -5, "maximum": 5},
        "when": {"type": "string", "format": "date"},
        "ok": {"type": "boolean"},
        "extra": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/pair"}]},
    },
    "required": ["title", "tags", "score", "when", "ok", "extra"],
    "additionalProperties": False,
    "$defs": {"pair": {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0, "maximum": 9},
                                                        {"type": "string", "maxLength": 3}],
                       "items": False}},
}
MESSAGES = [{"role": "user", "content": "Describe a story as JSON."}]


def test_json_schema_output_validates_50_of_50_at_temperature_1(stories):
    c = stories.client()
    fmt = {"type": "json_schema", "json_schema": {"name": "story", "schema": SCHEMA, "strict": True}}
    outputs = []
    for seed in range(5):
        r = c.chat.completions.create(model="stories260K", messages=MESSAGES, temperature=1.0, seed=seed, n=10,
                                      max_tokens=300, response_format=fmt)
        outputs += [ch for ch in r.choices]
    assert len(outputs) == 50
    for ch in outputs:
        assert ch.finish_reason == "stop", ch.message.content
        jsonschema.validate(json.loads(ch.message.content), SCHEMA, format_checker=jsonschema.FormatChecker())
    assert len({ch.message.content for ch in outputs}) > 10  # sampled, not one forced answer


def test_parse_with_a_pydantic_model_streamed_and_not(stories):
    c = stories.client()
    r = c.chat.completions.parse(model="stories260K", messages=MESSAGES, response_format=Person, temperature=1.0,
                                 seed=3, max_tokens=300)
    person = r.choices[0].message.parsed
    assert isinstance(person, Person) and 0 <= person.age <= 120 and len(person.pets) <= 3
    with c.chat.completions.stream(model="stories260K", messages=MESSAGES, response_format=Person, temperature=1.0,
                                   seed=3, max_tokens=300) as s:
        final = s.get_final_completion()
    assert final.choices[0].message.parsed == person  # the same draw, streamed


def test_json_object_gives_an_object(stories):
    r = stories.client().chat.completions.create(model="stories260K", messages=MESSAGES, temperature=1.0, seed=1,
                                                 n=8, max_tokens=400, response_format={"type": "json_object"})
    done = [ch for ch in r.choices if ch.finish_reason == "stop"]
    assert done, "no choice finished its object within max_tokens"
    for ch in done:
        assert isinstance(json.loads(ch.message.content), dict)


def test_unsupported_schema_keyword_is_400_naming_it(stories):
    schema = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 3}}, "required": ["n"]}
    r = stories.post("/v1/chat/completions", {"model": "stories260K", "messages": MESSAGES, "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "response_format.json_schema.schema.properties.n.multipleOf"
    assert "multipleOf" in err["message"]


@pytest.fixture(scope="module")
def r1(start_server):
    """llama.cpp's DeepSeek-R1 template opens a <think> block in its generation prompt."""
    return start_server(STORIES, "--chat-template", TEMPLATES / "llama-cpp-deepseek-r1.jinja")


def test_reasoning_content_streamed_and_not(r1):
    c = r1.client()
    kw = dict(model="stories260K", messages=[{"role": "user", "content": "Hi"}], temperature=0, max_tokens=40)
    whole = c.chat.completions.create(**kw).choices[0].message
    reasoning = whole.model_extra.get("reasoning_content")
    assert reasoning, whole  # the tiny model never closes the block: all of it is reasoning
    streamed_reasoning, streamed_content = "", ""
    for chunk in c.chat.completions.create(**kw, stream=True):
        if chunk.choices:
            d = chunk.choices[0].delta
            streamed_reasoning += (d.model_extra or {}).get("reasoning_content") or ""
            streamed_content += d.content or ""
    assert streamed_reasoning == reasoning
    assert streamed_content == (whole.content or "")


def test_chat_template_kwargs_and_reasoning_effort(start_server):
    s = start_server(STORIES, "--chat-template", TEMPLATES / "Qwen-Qwen3-0.6B.jinja")
    base = {"model": "stories260K", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    thinking = s.post("/v1/chat/completions", base).json()["usage"]["prompt_tokens"]
    off = s.post("/v1/chat/completions", {**base, "chat_template_kwargs": {"enable_thinking": False}})
    assert off.status_code == 200
    assert off.json()["usage"]["prompt_tokens"] > thinking  # Qwen3 writes an empty <think></think> block
    r = s.post("/v1/chat/completions", {**base, "reasoning_effort": "low"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "reasoning_effort"
    r = s.post("/v1/chat/completions", {**base, "chat_template_kwargs": {"messages": []}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "chat_template_kwargs.messages"

    # gpt-oss's template reads it: the server's prompt is jinja2's rendering with it.
    oss = start_server(STORIES, "--chat-template", TEMPLATES / "openai-gpt-oss-120b.jinja")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = lambda m: (_ for _ in ()).throw(Exception(m))
    env.globals["strftime_now"] = lambda f: datetime.date.today().strftime(f)
    tmpl = env.from_string((TEMPLATES / "openai-gpt-oss-120b.jinja").read_text())
    for effort in ("low", "high"):
        text = tmpl.render(messages=base["messages"], add_generation_prompt=True, bos_token="<s>", eos_token="</s>",
                           reasoning_effort=effort)
        assert f"Reasoning: {effort}" in text
        ids = oss.post("/tokenize", {"content": text, "parse_special": True, "add_special": True}).json()["tokens"]
        chat = oss.post("/v1/chat/completions", {**base, "reasoning_effort": effort, "max_tokens": 12, "temperature": 0})
        plain = oss.post("/v1/completions", {"model": "stories260K", "prompt": ids, "max_tokens": 12, "temperature": 0})
        assert chat.json()["usage"]["prompt_tokens"] == len(ids)
        assert chat.json()["choices"][0]["message"]["content"] == plain.json()["choices"][0]["text"]
