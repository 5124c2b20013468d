"""/v1/responses (stateless) through the official openai client. The Responses request is the
chat request in another shape, so at temperature 0 its text must be exactly what
/v1/chat/completions generates for the same messages, streamed or not."""
import openai
import pytest

USER = "Tell me about a cat."
SYSTEM = "You tell stories."
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "London"]}},
                         "required": ["city"]}}


def chat_text(c, messages, n):
    return c.chat.completions.create(model="stories260K", messages=messages, max_tokens=n, temperature=0)


def test_plain_equals_chat(stories):
    c = stories.client()
    r = c.responses.create(model="stories260K", input=USER, max_output_tokens=30, temperature=0)
    chat = chat_text(c, [{"role": "user", "content": USER}], 30)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == chat.choices[0].message.content and r.output_text
    assert r.output[0].type == "message" and r.output[0].role == "assistant"
    assert r.output[0].content[0].type == "output_text"
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    assert r.usage.output_tokens == chat.usage.completion_tokens
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    want = "incomplete" if chat.choices[0].finish_reason == "length" else "completed"
    assert r.status == want
    if want == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"


def test_instructions_and_items(stories):
    c = stories.client()
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    chat = chat_text(c, msgs, 20).choices[0].message.content
    a = c.responses.create(model="stories260K", instructions=SYSTEM, input=USER, max_output_tokens=20, temperature=0)
    items = [{"type": "message", "role": "developer", "content": SYSTEM},
             {"role": "user", "content": [{"type": "input_text", "text": "Tell me "},
                                          {"type": "input_text", "text": "about a cat."}]}]
    b = c.responses.create(model="stories260K", input=items, max_output_tokens=20, temperature=0, store=False)
    assert a.output_text == chat == b.output_text
    assert a.instructions == SYSTEM


def test_stream_events_and_text(stories):
    c = stories.client()
    whole = c.responses.create(model="stories260K", instructions=SYSTEM, input=USER, max_output_tokens=30,
                               temperature=0)
    events = list(c.responses.create(model="stories260K", instructions=SYSTEM, input=USER, max_output_tokens=30,
                                     temperature=0, stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert set(types[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    assert events[-4].text == text
    done = events[-1].response
    assert done.output_text == text and done.status == whole.status
    assert done.usage.output_tokens == whole.usage.output_tokens
    item_id = events[2].item.id
    assert all(e.item_id == item_id for e in events if e.type == "response.output_text.delta")


@pytest.mark.parametrize("extra,param", [
    ({"store": True}, "store"),
    ({"previous_response_id": "resp_123"}, "previous_response_id"),
    ({"unknown_thing": 1}, "unknown_thing"),
    ({"input": []}, "input"),
    ({"input": [{"type": "input_image", "image_url": "x"}]}, "input[0].type"),
    ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"temperature": 5}, "temperature"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
])
def test_rejections(stories, extra, param):
    r = stories.post("/v1/responses", dict({"model": "stories260K", "input": USER}, **extra))
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["message"]


def test_missing_input_and_model(stories):
    c = stories.client()
    with pytest.raises(openai.BadRequestError):
        c.responses.create(model="stories260K", input=USER, store=True)
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="nope", input=USER)
    r = stories.post("/v1/responses", {"model": "stories260K"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"


# The tests below need tool calling and structured output in the chat route (issue #17, being
# built beside this): until they land, the chat route answers these fields with a 400.

def test_forced_tool_call(stories):
    c = stories.client()
    r = c.responses.create(model="stories260K", input="Weather in Paris?", tools=[WEATHER],
                           tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=200)
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id
    import json
    assert isinstance(json.loads(calls[0].arguments)["city"], str)


def test_tool_round_trip_and_streamed_call(stories):
    c = stories.client()
    items = [{"role": "user", "content": "Weather in Paris?"},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]
    r = c.responses.create(model="stories260K", input=items, tools=[WEATHER], max_output_tokens=10, temperature=0)
    assert r.output[0].type == "message"
    events = list(c.responses.create(model="stories260K", input="Weather in Paris?", tools=[WEATHER],
                                     tool_choice="required", parallel_tool_calls=False, max_output_tokens=200,
                                     stream=True))
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types and "response.function_call_arguments.done" in types
    for done in (e for e in events if e.type == "response.function_call_arguments.done"):
        deltas = [e.delta for e in events
                  if e.type == "response.function_call_arguments.delta" and e.item_id == done.item_id]
        assert done.arguments == "".join(deltas)
    assert events[-1].response.output[-1].type == "function_call"


def test_json_schema_text_format(stories):
    import json
    c = stories.client()
    # maxLength bounds the document (an unbounded string sampled at temperature 1 from stories260K can
    # run past any token budget), so a completed response must parse.
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16}}, "required": ["name"],
              "additionalProperties": False}
    fmt = {"format": {"type": "json_schema", "name": "person", "schema": schema, "strict": True}}
    for _ in range(5):
        r = c.responses.create(model="stories260K", input="A name?", max_output_tokens=200, text=fmt)
        assert r.status == "completed" and r.incomplete_details is None
        doc = json.loads(r.output_text)
        assert isinstance(doc["name"], str) and len(doc["name"]) <= 16
    # A budget too small for the document: the response says it is incomplete and why.
    r = c.responses.create(model="stories260K", input="A name?", max_output_tokens=3, text=fmt)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
