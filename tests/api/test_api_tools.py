"""Tool calling through /v1/chat/completions, with the official openai client, LangChain and
LiteLLM against `deskside serve` (stories260K with Qwen2.5's template, whose tool format is
Hermes' <tool_call> JSON).

stories260K writes nonsense, so free ("auto") answers are only checked for shape here; parsing
calls out of real outputs is unit-tested (tests/server/test_tool_calls.cpp). Forced calls
(tool_choice "required" or a named function) go through the grammar, so even this model writes
a valid call: the arguments must be JSON matching the function's parameters.
"""
import json

import jinja2
import jsonschema
import openai
import pytest

from serve_helpers import TEMPLATE

M = "stories260K"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "enum": [1, 2, 3]}},
        "required": ["unit", "days"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time now.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather?"}]
HISTORY = ASK + [
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": "{\"unit\": \"celsius\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"}]


def check_weather_args(arguments):
    args = json.loads(arguments)
    assert set(args) == {"unit", "days"}
    assert args["unit"] in ("celsius", "fahrenheit") and args["days"] in (1, 2, 3)


def jinja2_prompt_ids(server, messages, tools):
    """The prompt as Python's jinja2 renders it (arguments decoded, as HF templates expect them),
    tokenized by the server: what the chat route must have sent to the model."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    msgs = json.loads(json.dumps(messages))
    for m in msgs:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    text = env.from_string(TEMPLATE.read_text()).render(messages=msgs, tools=tools, add_generation_prompt=True)
    return server.post("/tokenize", {"content": text, "add_special": True, "parse_special": True}).json()["tokens"]


def test_tool_history_renders_as_jinja2(stories):
    """With tools and a tool round trip in the history, the chat answer is the completion of
    jinja2's rendering: the server rendered the same prompt."""
    c = stories.client()
    for tool_choice in ("none", "auto"):
        chat = c.chat.completions.create(model=M, messages=HISTORY, tools=[WEATHER, TIME], tool_choice=tool_choice,
                                         max_tokens=12, temperature=0)
        ids = jinja2_prompt_ids(stories, HISTORY, [WEATHER, TIME])
        assert chat.usage.prompt_tokens == len(ids)
        plain = c.completions.create(model=M, prompt=ids, max_tokens=12, temperature=0)
        assert chat.choices[0].message.tool_calls is None
        assert chat.choices[0].message.content == plain.choices[0].text
        assert chat.choices[0].finish_reason == plain.choices[0].finish_reason


def test_auto_answer_shapes_streamed_and_not(stories):
    c = stories.client()
    whole = c.chat.completions.create(model=M, messages=ASK, tools=[WEATHER], max_tokens=20, temperature=0,
                                      parallel_tool_calls=True)
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].finish_reason in ("stop", "length")
    chunks = list(c.chat.completions.create(model=M, messages=ASK, tools=[WEATHER], max_tokens=20, temperature=0,
                                            stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_call(stories, tool_choice):
    c = stories.client()
    out = c.chat.completions.create(model=M, messages=ASK, tools=[TIME, WEATHER], tool_choice=tool_choice,
                                    parallel_tool_calls=False, max_tokens=200, temperature=0)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    if isinstance(tool_choice, dict):
        assert call.function.name == "get_weather"
    if call.function.name == "get_weather":
        check_weather_args(call.function.arguments)
    else:
        assert json.loads(call.function.arguments) == {}

    # Streamed: a delta with id, type, name and empty arguments, then the arguments.
    chunks = list(c.chat.completions.create(model=M, messages=ASK, tools=[TIME, WEATHER], tool_choice=tool_choice,
                                            parallel_tool_calls=False, max_tokens=200, temperature=0, stream=True))
    deltas = [d for ch in chunks if ch.choices for d in (ch.choices[0].delta.tool_calls or [])]
    assert deltas[0].index == 0 and deltas[0].id.startswith("call_") and deltas[0].type == "function"
    assert deltas[0].function.name == call.function.name and deltas[0].function.arguments == ""
    assert all(d.id is None and d.function.name is None for d in deltas[1:])
    assert "".join(d.function.arguments for d in deltas) == call.function.arguments
    assert not "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_forced_call_with_many_calls_allowed(stories):
    out = stories.client().chat.completions.create(model=M, messages=ASK, tools=[WEATHER], tool_choice="required",
                                                   max_tokens=300, temperature=0)
    assert out.choices[0].finish_reason in ("tool_calls", "length")
    if out.choices[0].finish_reason == "tool_calls":
        assert out.choices[0].message.tool_calls
        for call in out.choices[0].message.tool_calls:
            check_weather_args(call.function.arguments)
        assert len({call.id for call in out.choices[0].message.tool_calls}) == len(out.choices[0].message.tool_calls)


def test_legacy_functions(stories):
    c = stories.client()
    out = c.chat.completions.create(model=M, messages=ASK, functions=[WEATHER["function"]],
                                    function_call={"name": "get_weather"}, max_tokens=200, temperature=0)
    choice = out.choices[0]
    assert choice.finish_reason == "function_call"
    assert choice.message.tool_calls is None
    assert choice.message.function_call.name == "get_weather"
    check_weather_args(choice.message.function_call.arguments)
    # The legacy history shape is accepted too.
    history = ASK + [{"role": "assistant", "content": None, "function_call": {
        "name": "get_weather", "arguments": choice.message.function_call.arguments}},
        {"role": "function", "name": "get_weather", "content": "Sunny"}]
    again = c.chat.completions.create(model=M, messages=history, functions=[WEATHER["function"]], function_call="none",
                                      max_tokens=5)
    assert again.choices[0].message.function_call is None


@pytest.mark.parametrize("extra,param", [
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "launch"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0].function.name"),
    ({"tools": [WEATHER], "tool_choice": "maybe"}, "tool_choice"),
    ({"messages": ASK + [{"role": "tool", "tool_call_id": "call_9", "content": "x"}]}, "messages[1].tool_call_id"),
    ({"messages": ASK + [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "get_weather", "arguments": "{not json"}}]}]}, "messages[1].tool_calls[0].function.arguments"),
])
def test_tool_rejections(stories, extra, param):
    r = stories.post("/v1/chat/completions", dict({"model": M, "messages": ASK}, **extra))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    with pytest.raises(openai.BadRequestError):
        stories.client().chat.completions.create(**dict({"model": M, "messages": ASK, "max_tokens": 1}, **extra))


def test_langchain_bind_tools(stories):
    lc = pytest.importorskip("langchain_openai")
    llm = lc.ChatOpenAI(model=M, base_url=stories.url + "/v1", api_key="none", temperature=0, max_tokens=200,
                        max_retries=0)
    msg = llm.bind_tools([WEATHER], tool_choice="get_weather").invoke("What is the weather?")
    (call,) = msg.tool_calls
    assert call["name"] == "get_weather" and call["id"].startswith("call_")
    check_weather_args(json.dumps(call["args"]))


def test_litellm_tool_call(stories):
    litellm = pytest.importorskip("litellm")
    out = litellm.completion(model="openai/" + M, api_base=stories.url + "/v1", api_key="none", messages=ASK,
                             tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}},
                             max_tokens=200, temperature=0)
    (call,) = out.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    check_weather_args(call.function.arguments)
    assert out.choices[0].finish_reason == "tool_calls"


@pytest.fixture(scope="module")
def qwen3_coder(start_server):
    """stories260K with Qwen3-Coder's template, whose calls are XML (<function=...><parameter=...>)."""
    from serve_helpers import SHARED, STORIES
    return start_server(STORIES, "--chat-template", SHARED / "templates" / "Qwen3-Coder.jinja", "--parallel", 4)


def test_qwen3_coder_xml_calls(qwen3_coder):
    c = qwen3_coder.client()
    for seed in range(4):  # sampled, so the grammar, not greedy luck, makes every call valid
        out = c.chat.completions.create(model=M, messages=ASK, tools=[TIME, WEATHER], tool_choice="required",
                                        parallel_tool_calls=False, max_tokens=200, temperature=1.0, seed=seed,
                                        logprobs=True)
        choice = out.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message.content
        written = "".join(t.token for t in choice.logprobs.content)  # what the model wrote: the XML form
        assert written.startswith("<tool_call>\n<function=" + choice.message.tool_calls[0].function.name + ">\n")
        (call,) = choice.message.tool_calls
        if call.function.name == "get_weather":
            check_weather_args(call.function.arguments)  # "days" comes back an integer, from XML text
        else:
            assert json.loads(call.function.arguments) == {}
    # The call goes back into the history and renders through the template's XML branch.
    out = c.chat.completions.create(model=M, messages=HISTORY, tools=[TIME, WEATHER], max_tokens=5, temperature=0)
    assert out.choices[0].finish_reason in ("stop", "length", "tool_calls")


NAMED = {"type": "function", "function": {"name": "get_weather"}}


def call_deltas(chunks):
    return [d for ch in chunks if ch.choices for d in (ch.choices[0].delta.tool_calls or [])]


def test_streamed_call_arguments_arrive_in_pieces(stories):
    """A streamed call goes out as OpenAI streams one: a head delta (index, id, type, name, empty
    arguments) once the name is known and the arguments open, then the arguments in pieces as the
    model writes them. Joined, the pieces are the non-streamed call's arguments for the same seed,
    byte for byte; sampled at temperature 1, so the grammar keeps every call valid."""
    c = stories.client()
    for seed in range(3):
        kw = dict(model=M, messages=ASK, tools=[TIME, WEATHER], tool_choice=NAMED, max_tokens=200, temperature=1.0,
                  seed=seed)
        whole = c.chat.completions.create(**kw)
        assert whole.choices[0].finish_reason == "tool_calls"
        (call,) = whole.choices[0].message.tool_calls
        jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
        chunks = list(c.chat.completions.create(stream=True, **kw))
        head, *pieces = call_deltas(chunks)
        assert head.index == 0 and head.id.startswith("call_") and head.type == "function"
        assert head.function.name == "get_weather" and head.function.arguments == ""
        assert len(pieces) > 1
        assert all(d.index == 0 and d.id is None and d.type is None and d.function.name is None for d in pieces)
        joined = "".join(d.function.arguments for d in pieces)
        assert joined == call.function.arguments
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_call_cut_by_max_tokens(stories):
    """max_tokens inside a call's arguments: as OpenAI answers, the call with the arguments written
    so far (not complete JSON) and finish_reason "length", streamed and not alike."""
    c = stories.client()
    kw = dict(model=M, messages=ASK, tools=[WEATHER], tool_choice=NAMED, temperature=0)
    full = c.chat.completions.create(max_tokens=200, logprobs=True, **kw)
    complete = full.choices[0].message.tool_calls[0].function.arguments
    written, n = "", 0
    for n, t in enumerate(full.choices[0].logprobs.content, 1):  # the token that opens the arguments
        written += t.token
        if '"arguments": {' in written:
            break
    out = c.chat.completions.create(max_tokens=n + 2, **kw)
    assert out.choices[0].finish_reason == "length"
    (call,) = out.choices[0].message.tool_calls
    cut = call.function.arguments
    assert cut.startswith("{") and complete.startswith(cut) and cut != complete
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut)
    chunks = list(c.chat.completions.create(max_tokens=n + 2, stream=True, **kw))
    assert "".join(d.function.arguments for d in call_deltas(chunks)) == cut
    assert chunks[-1].choices[0].finish_reason == "length"


def strict(tool):
    return {"type": "function", "function": dict(tool["function"], strict=True)}


def test_strict_tools_with_auto_leave_free_text_free(stories):
    """Strict tools with tool_choice auto: a grammar that starts only at the model's <tool_call>
    (engine-tested in tests/engine/test_engine_loop.cpp, the grammar in test_tool_calls.cpp).
    stories260K never writes the marker, so its answer is the free one, streamed or not."""
    c = stories.client()
    tools = [strict(WEATHER), TIME]
    # The free answer: the same prompt (jinja2's rendering, "strict" in it) as a plain completion.
    free = c.completions.create(model=M, prompt=jinja2_prompt_ids(stories, ASK, tools), max_tokens=24, temperature=0)
    held = c.chat.completions.create(model=M, messages=ASK, tools=tools, max_tokens=24, temperature=0)
    assert held.choices[0].message.content == free.choices[0].text
    assert held.choices[0].finish_reason == free.choices[0].finish_reason
    chunks = list(c.chat.completions.create(model=M, messages=ASK, tools=tools, max_tokens=24, temperature=0,
                                            stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == free.choices[0].text


def test_strict_tool_with_unenforceable_schema_is_400(stories):
    """strict with auto holds a call to its schema; a keyword the grammar cannot enforce is a 400
    naming the parameters, never a silent promise. Not strict, the same schema is accepted."""
    paint = {"type": "function", "function": {"name": "paint", "strict": True, "parameters": {
        "type": "object", "properties": {"color": {"type": "string", "format": "color"}}, "required": ["color"],
        "additionalProperties": False}}}
    body = {"model": M, "messages": ASK, "tools": [paint], "tool_choice": "auto", "max_tokens": 4}
    r = stories.post("/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "tools[0].function.parameters" and "format" in r.json()["error"]["message"]
    lax = {"type": "function", "function": dict(paint["function"], strict=False)}
    assert stories.post("/v1/chat/completions", dict(body, tools=[lax])).status_code == 200


@pytest.fixture(scope="module")
def llama3_parser(start_server):
    """stories260K with calls read as Llama 3's bare JSON (--tool-parser llama3)."""
    from serve_helpers import STORIES
    return start_server(STORIES, "--chat-template", TEMPLATE, "--tool-parser", "llama3")


def test_strict_tools_with_auto_need_a_printed_call_marker(llama3_parser):
    """Llama 3's calls have no marker in the text to start a grammar at, so strict with auto cannot
    be honoured there: a 400 naming tools, never a silent drop; forced calls still work."""
    body = {"model": M, "messages": ASK, "tools": [strict(WEATHER)], "max_tokens": 8}
    r = llama3_parser.post("/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "tools" and "llama3" in err["message"] and "required" in err["message"]
    forced = llama3_parser.post("/v1/chat/completions", dict(body, tool_choice="required", parallel_tool_calls=False,
                                                                    max_tokens=200))
    assert forced.status_code == 200, forced.text
    (call,) = forced.json()["choices"][0]["message"]["tool_calls"]
    check_weather_args(call["function"]["arguments"])
