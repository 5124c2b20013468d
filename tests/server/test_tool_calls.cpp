// Tool calling: the request's tool fields (validated as OpenAI's API reference states them), the
// history mapped onto the Hugging Face message conventions, and model output parsed back into
// calls per template family, whole and streamed. The outputs below are written the way each
// family's chat template instructs the model (../shared/templates); the streamed parse must not
// depend on how the text is chunked.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/grammar.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/tool_calls.h"
#include "support/paths.h"

using deskside::server::ApiError;
using deskside::server::ChatRequest;
using deskside::server::ParsedToolCalls;
using deskside::server::ToolCallStream;
using deskside::server::ToolChoice;
using deskside::server::ToolFormat;
using deskside::server::ToolsRequest;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const ordered_json kWeather = ordered_json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "Weather for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}})");
const ordered_json kTime = ordered_json::parse(R"({"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {}}}})");

ordered_json chat(ordered_json extra = ordered_json::object()) {
    ordered_json j = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    return j;
}

ToolsRequest tools(bool parallel = true) {
    return deskside::server::parse_chat_request(
               chat({{"tools", {kWeather, kTime}}, {"parallel_tool_calls", parallel}}))
        .tools;
}

ApiError error_of(const ordered_json& body) {
    try {
        deskside::server::parse_chat_request(body);
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("no ApiError for " << body.dump());
    throw;
}

// Ids "id0", "id1", ... so that whole and streamed parses compare equal.
ToolCallStream::IdSource counter() {
    auto n = std::make_shared<int>(0);
    return [n] { return "id" + std::to_string((*n)++); };
}

ParsedToolCalls parse(std::string_view text, ToolFormat f, const ToolsRequest& t) {
    return deskside::server::parse_tool_calls(text, f, t, counter());
}

// Feeds `text` in pieces cut by `cuts` (sizes, cycled) and joins the events as parse_tool_calls does.
ParsedToolCalls parse_streamed(std::string_view text, ToolFormat f, const ToolsRequest& t, std::vector<size_t> cuts) {
    ToolCallStream stream(f, t, counter());
    ParsedToolCalls out;
    const auto take = [&](std::vector<deskside::server::ToolCallEvent> events) {
        for (auto& e : events) {
            if (e.call) {
                CHECK(e.index == out.calls.size());
                CHECK(e.content.empty());
                CHECK(e.call->arguments.empty());  // they follow in pieces
                out.calls.push_back(*e.call);
            } else if (!e.arguments.empty()) {
                REQUIRE(e.index < out.calls.size());
                out.calls[e.index].arguments += e.arguments;
            } else {
                out.content += e.content;
            }
        }
    };
    size_t i = 0, k = 0;
    while (i < text.size()) {
        const size_t n = std::min(cuts[k++ % cuts.size()], text.size() - i);
        take(stream.feed(text.substr(i, n)));
        i += n;
    }
    take(stream.finish());
    out.cut = stream.cut();
    return out;
}

void check_same(const ParsedToolCalls& a, const ParsedToolCalls& b) {
    CHECK(a.content == b.content);
    CHECK(a.cut == b.cut);
    REQUIRE(a.calls.size() == b.calls.size());
    for (size_t i = 0; i < a.calls.size(); ++i) {
        CHECK(a.calls[i].id == b.calls[i].id);
        CHECK(a.calls[i].name == b.calls[i].name);
        CHECK(a.calls[i].arguments == b.calls[i].arguments);
    }
}

struct Sample {
    ToolFormat format;
    std::string text;
    std::string content;
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
    bool cut = false;  // the last call was sent and its arguments never completed
};

// Outputs in the shape each template asks for, with and without the mistakes models make.
const std::vector<Sample>& samples() {
    static const std::vector<Sample> s = {
        // Qwen2.5 / Qwen3 / Hermes 2 Pro: one JSON object per <tool_call> block.
        {ToolFormat::kHermes,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
         "",
         {{"get_weather", R"({"city":"Paris"})"}}},
        {ToolFormat::kHermes,
         "I'll check both.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xc3\xbcrich\", "
         "\"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
         "{}}\n</tool_call>",
         "I'll check both.",
         {{"get_weather", "{\"city\":\"Z\xc3\xbcrich\",\"unit\":\"celsius\"}"}, {"get_time", "{}"}}},
        // The model stopped (end of generation) before the closing tag: the JSON is complete.
        {ToolFormat::kHermes,
         "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{}\"}",
         "",
         {{"get_time", "{}"}}},
        // The call's object never closed, but its arguments did: the call was sent and is whole.
        {ToolFormat::kHermes,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>",
         "",
         {{"get_weather", R"({"city":"Paris"})"}}},
        // Cut after it was sent (max_tokens): the arguments so far, not complete JSON.
        {ToolFormat::kHermes,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
         "",
         {{"get_weather", R"({"city":"Par)"}},
         true},
        // Broken after it was sent: the arguments up to the bad byte; the rest of the call is dropped.
        {ToolFormat::kHermes,
         "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"x\": 01}}</tool_call> After.",
         "After.",
         {{"get_time", R"({"x":0)"}},
         true},
        // Arguments before the name, or encoded as a string: held until the call's object closes;
        // numbers and escapes stay as written.
        {ToolFormat::kHermes,
         "<tool_call>{\"arguments\": {\"city\": \"P\\u00e9k\", \"n\": 1.50e1}, \"name\": \"get_weather\"}</tool_call>",
         "",
         {{"get_weather", R"({"city":"P\u00e9k","n":1.50e1})"}}},
        {ToolFormat::kHermes,
         "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}</tool_call>",
         "",
         {{"get_weather", R"({"city":"Oslo"})"}}},
        // An unknown function, a call cut before it was sent: content, byte for byte.
        {ToolFormat::kHermes,
         "Sure. <tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call> Done.",
         "Sure. <tool_call>{\"name\": \"launch\", \"arguments\": {}}</tool_call> Done.",
         {}},
        {ToolFormat::kHermes,
         "<tool_call>\n{\"name\": \"get_weather\", \"argu",
         "<tool_call>\n{\"name\": \"get_weather\", \"argu",
         {}},
        {ToolFormat::kHermes, "a < b and x <tool but not a call\n", "a < b and x <tool but not a call\n", {}},
        {ToolFormat::kHermes,
         "Text, a call, text.<tool_call>{\"name\":\"get_time\"}</tool_call>\nAfter it.",
         "Text, a call, text.After it.",
         {{"get_time", "{}"}}},
        // A ```json fence around the call, as Qwen2.5-Coder (the default model) often answers with
        // tool_choice auto; fences that hold anything else stay content.
        {ToolFormat::kHermes,
         "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```",
         "",
         {{"get_weather", R"({"city":"Paris"})"}}},
        {ToolFormat::kHermes,
         "Here:\n```json\n[{\"name\": \"get_time\", \"arguments\": {}}]\n```\nDone.",
         "Here:Done.",
         {{"get_time", "{}"}}},
        {ToolFormat::kHermes,
         "```json\n{\"city\": \"Paris\"}\n```\n```python\nprint(1)\n```",
         "```json\n{\"city\": \"Paris\"}\n```\n```python\nprint(1)\n```",
         {}},
        {ToolFormat::kGeneric,
         "Calling it.\n```json\n{\"name\": \"get_time\", \"arguments\": {}}",
         "Calling it.",
         {{"get_time", "{}"}}},
        {ToolFormat::kHermes, "ends in a partial fence ``", "ends in a partial fence ``", {}},
        // Qwen3-Coder: XML inside <tool_call>, one <parameter=...> block per argument; values are text
        // where the schema says string. JSON inside its <tool_call> is read as Hermes's.
        {ToolFormat::kQwen3Xml,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=unit>\n"
         "celsius\n</parameter>\n</function>\n</tool_call>",
         "",
         {{"get_weather", R"({"city":"New York","unit":"celsius"})"}}},
        {ToolFormat::kQwen3Xml,
         "Let me check.\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n<tool_call>\n{\"name\": "
         "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
         "Let me check.",
         {{"get_time", "{}"}, {"get_weather", R"({"city":"Oslo"})"}}},
        {ToolFormat::kQwen3Xml,
         "<tool_call>\n<function=launch>\n</function>\n</tool_call>",
         "<tool_call>\n<function=launch>\n</function>\n</tool_call>",
         {}},
        // Sent at <function=get_weather>, then broken inside a value: cut, its arguments "{".
        {ToolFormat::kQwen3Xml,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>",
         "",
         {{"get_weather", "{"}},
         true},
        // Llama 3.x: bare JSON with "parameters", optionally after <|python_tag|>; ';' between calls.
        {ToolFormat::kLlama3,
         "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
         "",
         {{"get_weather", R"({"city":"Paris"})"}}},
        {ToolFormat::kLlama3, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}", "", {{"get_time", "{}"}}},
        {ToolFormat::kLlama3,
         "\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": \"get_time\", "
         "\"parameters\": {}}",
         "",
         {{"get_weather", R"({"city":"Oslo"})"}, {"get_time", "{}"}}},
        {ToolFormat::kLlama3, "{\"answer\": 42}", "{\"answer\": 42}", {}},
        {ToolFormat::kLlama3, "The weather is {fine}.", "The weather is {fine}.", {}},
        {ToolFormat::kLlama3,
         "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par",
         "",
         {{"get_weather", R"({"city":"Par)"}},
         true},
        {ToolFormat::kLlama3, "{\"name\": \"get_weather\", \"par", "{\"name\": \"get_weather\", \"par", {}},
        // Mistral: [TOOL_CALLS] and a JSON array; the marker is a control token the detokenizer drops.
        {ToolFormat::kMistral,
         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"unit\": \"celsius\"}, "
         "\"id\": \"a1b2c3d4e\"}]",
         "",
         {{"get_weather", R"({"city":"Rome","unit":"celsius"})"}}},
        {ToolFormat::kMistral,
         "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": "
         "\"Rome\"}}]",
         "",
         {{"get_time", "{}"}, {"get_weather", R"({"city":"Rome"})"}}},
        {ToolFormat::kMistral,
         "Let me look.[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {}}]",
         "Let me look.",
         {{"get_time", "{}"}}},
        {ToolFormat::kMistral, "[1, 2, 3] are numbers [TOOL_CALLS", "[1, 2, 3] are numbers [TOOL_CALLS", {}},
        // Generic: a JSON object or array opening the answer.
        {ToolFormat::kGeneric,
         "  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}  ",
         "",
         {{"get_weather", R"({"city":"Lima"})"}}},
        {ToolFormat::kGeneric, "[{\"name\": \"get_time\"}]\nThat is all.", "That is all.", {{"get_time", "{}"}}},
        {ToolFormat::kGeneric, "Use {\"name\": \"get_time\"} to ask.", "Use {\"name\": \"get_time\"} to ask.", {}},
        {ToolFormat::kGeneric,
         "{\"name\": \"get_time\", \"arguments\": [1]}",
         "{\"name\": \"get_time\", \"arguments\": [1]}",
         {}},
    };
    return s;
}

std::string read_template(const std::string& name) {
    std::ifstream in(deskside::test::shared_path("templates/" + name), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("tool calls: each family's output is parsed into calls and content", "[tool-calls]") {
    const ToolsRequest t = tools();
    for (const Sample& s : samples()) {
        INFO(deskside::server::tool_format_name(s.format) << ": " << s.text);
        const ParsedToolCalls p = parse(s.text, s.format, t);
        CHECK(p.content == s.content);
        CHECK(p.cut == s.cut);
        REQUIRE(p.calls.size() == s.calls.size());
        for (size_t i = 0; i < p.calls.size(); ++i) {
            CHECK(p.calls[i].id == "id" + std::to_string(i));
            CHECK(p.calls[i].name == s.calls[i].first);
            CHECK(p.calls[i].arguments == s.calls[i].second);
        }
    }
}

TEST_CASE("tool calls: the stream gives the same result however the text is cut", "[tool-calls]") {
    const ToolsRequest t = tools();
    std::mt19937 rng(7);
    for (const Sample& s : samples()) {
        INFO(deskside::server::tool_format_name(s.format) << ": " << s.text);
        const ParsedToolCalls whole = parse(s.text, s.format, t);
        check_same(parse_streamed(s.text, s.format, t, {1}), whole);
        check_same(parse_streamed(s.text, s.format, t, {2, 3, 5}), whole);
        std::vector<size_t> random_cuts;
        for (int i = 0; i < 16; ++i) random_cuts.push_back(1 + rng() % 12);
        check_same(parse_streamed(s.text, s.format, t, random_cuts), whole);
    }
}

TEST_CASE("tool calls: the stream is the same cut at every one or two places", "[tool-calls]") {
    const ToolsRequest t = tools();
    for (const size_t k : {1, 4, 6, 8}) {  // samples with calls sent, cut, held, and only content
        const Sample& s = samples()[k];
        INFO(s.text);
        const ParsedToolCalls whole = parse(s.text, s.format, t);
        for (size_t a = 1; a < s.text.size(); ++a)
            for (size_t b = a; b < s.text.size(); ++b)
                check_same(parse_streamed(s.text, s.format, t, {a, b - a + 1, s.text.size()}), whole);
    }
}

TEST_CASE("tool calls: a call is sent once its name is known, then its arguments as they are written",
          "[tool-calls]") {
    const ToolsRequest t = tools();
    const std::string text =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
        "</tool_call>";
    ToolCallStream stream(ToolFormat::kHermes, t, counter());
    const auto head = stream.feed(text.substr(0, text.find("{\"city")));
    CHECK(head.empty());  // the name is known, but the arguments have not opened
    auto events = stream.feed("{\"city\": \"Pa");
    REQUIRE(events.size() == 2);
    REQUIRE(events[0].call);
    CHECK(events[0].call->id == "id0");
    CHECK(events[0].call->name == "get_weather");
    CHECK(events[0].arguments.empty());
    CHECK(events[1].arguments == R"({"city":"Pa)");
    events = stream.feed("ris\", ");
    REQUIRE(events.size() == 1);
    CHECK(events[0].arguments == R"(ris",)");
    CHECK(events[0].index == 0);
    // Every format streams: byte by byte, the head comes once, then more than one piece.
    for (const Sample& s : samples()) {
        if (s.calls.empty()) continue;
        INFO(deskside::server::tool_format_name(s.format) << ": " << s.text);
        ToolCallStream bytes(s.format, t, counter());
        std::vector<size_t> heads, pieces(s.calls.size());
        auto take = [&](const std::vector<deskside::server::ToolCallEvent>& evs) {
            for (const auto& e : evs) {
                if (e.call) heads.push_back(e.index);
                if (!e.arguments.empty()) {
                    REQUIRE(e.index < heads.size());  // never before the call's head
                    ++pieces[e.index];
                }
            }
        };
        for (const char c : s.text) take(bytes.feed(std::string_view(&c, 1)));
        take(bytes.finish());
        REQUIRE(heads.size() == s.calls.size());
        for (size_t i = 0; i < heads.size(); ++i) CHECK(heads[i] == i);
        // Qwen3-Coder sends one piece per parameter; JSON arguments of more than "{}" come byte by byte.
        if (s.calls[0].second.size() > 2 && s.format != ToolFormat::kQwen3Xml &&
            s.text.find("{\"arguments") == std::string::npos && s.text.find("\"{\\") == std::string::npos)
            CHECK(pieces[0] > 1);
    }
}

TEST_CASE("tool calls: the JSON scanner accepts exactly JSON", "[tool-calls]") {
    using deskside::server::JsonScanner;
    const std::vector<std::string> texts = {
        R"({})", R"([])", R"({"a": [1, -2.5e+3, 0, 0.0, true, false, null, "x\"\u00e9\n"], "b": {}})",
        R"([{"a": 1}, [], "s", -0])", R"({"a": 01})", R"({"a": 1.})", R"({"a": .5})", R"({"a": 1e})", R"({"a": -})",
        R"({"a" 1})", R"({"a": 1,})", R"([1,])", R"({a: 1})", R"({"a": tru})", R"({"a": "\x"})", R"({"a": "\u12g4"})",
        R"({"a": 1} x)", R"({"a": 1]})", R"([1}])", "{\"a\": \"\x01\"}", R"({"a": nul})", R"({"a": 1E5, "b": 2e-1})",
        R"({"a": [[[]]], "b": [{"c": [{}]}]})", R"("top")", R"(5)",
    };
    for (const std::string& text : texts) {
        INFO(text);
        JsonScanner scanner;
        bool ok = true;
        std::string compact;
        for (const char c : text) {
            const JsonScanner::Step step = scanner.push(c);
            if (step == JsonScanner::Step::kError) {
                ok = false;
                break;
            }
            if (step != JsonScanner::Step::kSpace) compact += c;
        }
        const bool container = text.starts_with('{') || text.starts_with('[');
        CHECK((ok && scanner.done()) == (container && json::accept(text)));
        if (ok && scanner.done()) CHECK(json::parse(compact) == json::parse(text));
    }
    CHECK(deskside::server::compact_json_object(" { \"a\" : [ 1 , 2 ] } ") == R"({"a":[1,2]})");
    CHECK(deskside::server::compact_json_object("[1]").empty());
    CHECK(deskside::server::compact_json_object("{} {}").empty());
}

TEST_CASE("tool calls: a stream never shows part of a call marker as content", "[tool-calls]") {
    const ToolsRequest t = tools();
    const std::string text = "Checking.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    ToolCallStream stream(ToolFormat::kHermes, t, counter());
    std::string shown;
    for (const char c : text)
        for (const auto& e : stream.feed(std::string_view(&c, 1))) {
            shown += e.content;
            CHECK(shown.find('<') == std::string::npos);
            if (e.call) CHECK(e.call->name == "get_time");
        }
    CHECK(shown == "Checking.");
    CHECK(stream.n_calls() == 1);
    // Text that only looked like the start of a marker is released once it cannot be one.
    ToolCallStream plain(ToolFormat::kHermes, t, counter());
    CHECK(plain.feed("x <tool").empty() == false);
    const auto later = plain.feed("s>");
    REQUIRE(later.size() == 1);
    CHECK(later[0].content == " <tools>");
}

TEST_CASE("tool calls: without parallel_tool_calls only the first call is kept", "[tool-calls]") {
    const ParsedToolCalls p = parse(samples()[1].text, ToolFormat::kHermes, tools(false));
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].name == "get_weather");
    CHECK(p.content == "I'll check both.");
}

TEST_CASE("tool calls: the family is read from the chat template", "[tool-calls]") {
    using deskside::server::detect_tool_format;
    CHECK(detect_tool_format(read_template("Qwen-Qwen2.5-7B-Instruct.jinja")) == ToolFormat::kHermes);
    CHECK(detect_tool_format(read_template("Qwen-Qwen3-0.6B.jinja")) == ToolFormat::kHermes);
    CHECK(detect_tool_format(read_template("Qwen3-Coder.jinja")) == ToolFormat::kQwen3Xml);
    CHECK(detect_tool_format(read_template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")) ==
          ToolFormat::kHermes);
    CHECK(detect_tool_format(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja")) == ToolFormat::kLlama3);
    CHECK(detect_tool_format(read_template("meta-llama-Llama-3.2-3B-Instruct.jinja")) == ToolFormat::kLlama3);
    CHECK(detect_tool_format(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")) == ToolFormat::kMistral);
    CHECK(detect_tool_format(read_template("google-gemma-2-2b-it.jinja")) == ToolFormat::kGeneric);
    for (const char* name : {"hermes", "qwen3_coder", "llama3", "mistral", "generic"})
        CHECK(deskside::server::tool_format_name(*deskside::server::tool_format_from_name(name)) == std::string(name));
    CHECK_FALSE(deskside::server::tool_format_from_name("qwen"));
    CHECK(deskside::server::new_tool_call_id(ToolFormat::kHermes).rfind("call_", 0) == 0);
    CHECK(deskside::server::new_tool_call_id(ToolFormat::kMistral).size() == 9);
}

TEST_CASE("tool calls: request fields are parsed", "[tool-calls]") {
    using deskside::server::parse_chat_request;
    ChatRequest r = parse_chat_request(chat({{"tools", {kWeather, kTime}}}));
    CHECK(r.tools.choice == ToolChoice::kAuto);
    CHECK(r.tools.parallel);
    REQUIRE(r.tools.functions.size() == 2);
    CHECK(r.tools.functions[0].parameters["required"] == ordered_json::array({"city"}));
    // The template sees the tools as sent, key order kept (tojson prints them in that order).
    CHECK(r.tools.tools[0].dump() == kWeather.dump());
    CHECK(parse_chat_request(chat()).tools.choice == ToolChoice::kNone);
    r = parse_chat_request(chat({{"tools", {kWeather}}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}));
    CHECK(r.tools.choice == ToolChoice::kRequired);
    CHECK_FALSE(r.tools.parallel);
    r = parse_chat_request(chat({{"tools", {kWeather, kTime}},
                                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}));
    CHECK(r.tools.choice == ToolChoice::kNamed);
    CHECK(r.tools.forced == "get_time");
    CHECK(parse_chat_request(chat({{"tools", {kWeather}}, {"tool_choice", "none"}})).tools.choice ==
          ToolChoice::kNone);
    // strict and a null description are accepted; the null is not shown to the template.
    ordered_json f = kTime;
    f["function"]["strict"] = true;
    f["function"]["description"] = nullptr;
    r = parse_chat_request(chat({{"tools", {f}}}));
    CHECK(r.tools.functions[0].strict);
    CHECK_FALSE(r.tools.tools[0]["function"].contains("description"));
    // Legacy functions / function_call.
    r = parse_chat_request(
        chat({{"functions", {kWeather["function"]}}, {"function_call", {{"name", "get_weather"}}}}));
    CHECK(r.tools.legacy);
    CHECK_FALSE(r.tools.parallel);
    CHECK(r.tools.choice == ToolChoice::kNamed);
    CHECK(r.tools.tools[0] == kWeather);
}

TEST_CASE("tool calls: bad tool fields are 400s naming the field", "[tool-calls]") {
    ordered_json unnamed = kTime;
    unnamed["function"].erase("name");
    ordered_json extra_key = kTime;
    extra_key["function"]["returns"] = "x";
    ordered_json bad_name = kTime;
    bad_name["function"]["name"] = "get time";
    const std::vector<std::pair<ordered_json, std::string>> cases = {
        {{{"tools", ordered_json::array()}}, "tools"},
        {{{"tools", "get_time"}}, "tools"},
        {{{"tools", {{{"type", "function"}}}}}, "tools[0].function"},
        {{{"tools", {{{"type", "code_interpreter"}}}}}, "tools[0].type"},
        {{{"tools", {{{"function", kTime["function"]}}}}}, "tools[0].type"},
        {{{"tools", {{{"type", "function"}, {"function", kTime["function"]}, {"x", 1}}}}}, "tools[0].x"},
        {{{"tools", {unnamed}}}, "tools[0].function.name"},
        {{{"tools", {extra_key}}}, "tools[0].function.returns"},
        {{{"tools", {bad_name}}}, "tools[0].function.name"},
        {{{"tools", {kTime, kTime}}}, "tools[1].function.name"},
        {{{"tools", {kWeather}}, {"tool_choice", "sometimes"}}, "tool_choice"},
        {{{"tools", {kWeather}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}},
         "tool_choice"},
        {{{"tools", {kWeather}}, {"tool_choice", {{"type", "function"}}}}, "tool_choice.function"},
        {{{"tools", {kWeather}}, {"tool_choice", {{"type", "allowed_tools"}}}}, "tool_choice.type"},
        {{{"tools", {kWeather}}, {"tool_choice", 3}}, "tool_choice"},
        {{{"tool_choice", "auto"}}, "tool_choice"},
        {{{"parallel_tool_calls", true}}, "parallel_tool_calls"},
        {{{"tools", {kWeather}}, {"parallel_tool_calls", "yes"}}, "parallel_tool_calls"},
        {{{"function_call", "auto"}}, "function_call"},
        {{{"functions", {kTime["function"]}}, {"function_call", "required"}}, "function_call"},
        {{{"functions", {kTime["function"]}}, {"tools", {kWeather}}}, "functions"},
    };
    for (const auto& [extra, param] : cases) {
        INFO(extra.dump());
        const ApiError e = error_of(chat(extra));
        CHECK(e.status() == 400);
        CHECK(e.param() == param);
    }
}

TEST_CASE("tool calls: the history is mapped onto the template conventions", "[tool-calls]") {
    const ordered_json body = chat(
        {{"tools", {kWeather}}, {"messages", ordered_json::parse(R"([{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_7", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\"unit\": \"celsius\", \"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_7", "content": [{"type": "text", "text": "21 C"}]},
            {"role": "assistant", "content": "It is 21 C."}])")}});
    const ChatRequest r = deskside::server::parse_chat_request(body);
    // Arguments arrive decoded, in the client's key order; the null content becomes "".
    CHECK(r.messages[1].dump() ==
          R"({"role":"assistant","content":"","tool_calls":[{"id":"call_7","type":"function","function":)"
          R"({"name":"get_weather","arguments":{"unit":"celsius","city":"Paris"}}}]})");
    CHECK(r.messages[2].dump() == R"({"role":"tool","tool_call_id":"call_7","content":"21 C"})");
    CHECK_FALSE(r.messages[3].contains("tool_calls"));

    // Legacy function_call and role "function" become a tool call and its result.
    const ChatRequest legacy = deskside::server::parse_chat_request(
        chat({{"messages", ordered_json::parse(R"([{"role": "user", "content": "time?"},
            {"role": "assistant", "content": null, "function_call": {"name": "get_time", "arguments": ""}},
            {"role": "function", "name": "get_time", "content": "12:00"}])")}}));
    CHECK(legacy.messages[1]["tool_calls"][0]["id"] == "call00001");
    CHECK(legacy.messages[1]["tool_calls"][0]["function"]["arguments"] == ordered_json::object());
    CHECK(legacy.messages[2].dump() ==
          R"({"role":"tool","name":"get_time","tool_call_id":"call00001","content":"12:00"})");
}

TEST_CASE("tool calls: bad history messages are 400s naming the field", "[tool-calls]") {
    const auto msgs = [](const char* assistant_and_tool) {
        return chat({{"messages", ordered_json::parse(std::string(R"([{"role": "user", "content": "q"}, )") +
                                                      assistant_and_tool + "]")}});
    };
    // An assistant turn with one call whose fields are `fields`.
    const auto call = [](const std::string& fields) {
        return R"({"role": "assistant", "tool_calls": [{)" + fields + "}]}";
    };
    const std::string f = R"("function": {"name": "f", "arguments": "{}"})";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {call(R"("id": "a", "type": "function", "function": {"name": "f", "arguments": "{"})"),
         "messages[1].tool_calls[0].function.arguments"},
        {call(R"("id": "a", "type": "function", "function": {"name": "f", "arguments": "[1]"})"),
         "messages[1].tool_calls[0].function.arguments"},
        {call(R"("type": "function", )" + f), "messages[1].tool_calls[0].id"},
        {call(R"("id": "a", "type": "function", "function": {"arguments": "{}"})"),
         "messages[1].tool_calls[0].function.name"},
        {call(R"("id": "a", "type": "custom", )" + f), "messages[1].tool_calls[0].type"},
        {R"({"role": "assistant", "tool_calls": {"id": "a"}})", "messages[1].tool_calls"},
        {call(R"("id": "a", "type": "function", )" + f) + R"(, {"role": "tool", "tool_call_id": "b", "content": "x"})",
         "messages[2].tool_call_id"},
        {R"({"role": "tool", "content": "x"})", "messages[1].tool_call_id"},
        {R"({"role": "user", "content": "x", "tool_calls": []})", "messages[1].tool_calls"},
        {R"({"role": "function", "name": "f", "content": "x"})", "messages[1]"},
    };
    for (const auto& [m, param] : cases) {
        INFO(m);
        const ApiError e = error_of(msgs(m.c_str()));
        CHECK(e.status() == 400);
        CHECK(e.param() == param);
    }
}

TEST_CASE("tool calls: Qwen3-Coder's XML calls are forced with typed, bounded parameters", "[tool-calls]") {
    const ordered_json alarm = ordered_json::parse(R"({"type": "function", "function": {"name": "set_alarm",
        "parameters": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
        "label": {"type": "string", "maxLength": 8}, "mode": {"type": "string", "enum": ["on", "off"]}},
        "required": ["hour", "mode"]}}})");
    ToolsRequest t = deskside::server::parse_chat_request(chat({{"tools", {alarm}}, {"tool_choice", "required"}})).tools;
    const auto g = deskside::server::tool_call_grammar(t, ToolFormat::kQwen3Xml);
    const auto call = [](const std::string& params) {
        return "<tool_call>\n<function=set_alarm>\n" + params + "</function>\n</tool_call>";
    };
    const std::string hour7 = "<parameter=hour>\n7\n</parameter>\n", on = "<parameter=mode>\non\n</parameter>\n";
    CHECK(g->matches(call(hour7 + on)));
    CHECK(g->matches(call(hour7 + "<parameter=label>\nwake up\n</parameter>\n" + on)));
    CHECK_FALSE(g->matches(call(hour7)));                                                       // mode is required
    CHECK_FALSE(g->matches(call("<parameter=hour>\n24\n</parameter>\n" + on)));                // maximum
    CHECK_FALSE(g->matches(call(hour7 + "<parameter=mode>\nmaybe\n</parameter>\n")));          // enum
    CHECK_FALSE(g->matches(call(hour7 + "<parameter=label>\nwake up now\n</parameter>\n" + on)));  // maxLength
    // What the grammar writes parses back with the schema's types.
    const ParsedToolCalls p = parse(call(hour7 + "<parameter=label>\nwake up\n</parameter>\n" + on),
                                    ToolFormat::kQwen3Xml, t);
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].arguments == R"({"hour":7,"label":"wake up","mode":"on"})");
    // A pattern cannot be enforced on raw text: the request is refused, naming the schema.
    const ordered_json patterned = ordered_json::parse(R"({"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}}})");
    t = deskside::server::parse_chat_request(chat({{"tools", {patterned}}, {"tool_choice", "required"}})).tools;
    CHECK_THROWS_AS(deskside::server::tool_call_grammar(t, ToolFormat::kQwen3Xml), ApiError);
}

TEST_CASE("tool calls: the forcing grammar accepts exactly the family's call format", "[tool-calls]") {
    using deskside::server::tool_call_grammar;
    ToolsRequest t = tools();
    t.choice = ToolChoice::kRequired;
    const auto hermes = tool_call_grammar(t, ToolFormat::kHermes);
    const std::string call =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>";
    CHECK(hermes->matches(call));
    CHECK(hermes->matches(call + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(hermes->matches("Sure! " + call));
    CHECK_FALSE(hermes->matches(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // city is required
    CHECK_FALSE(hermes->matches("<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>"));
    // Every text the grammar allows parses back as the calls it spells.
    const ParsedToolCalls p = parse(call, ToolFormat::kHermes, t);
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].arguments == R"({"city":"Paris"})");

    t.choice = ToolChoice::kNamed;
    t.forced = "get_time";
    const auto named = tool_call_grammar(t, ToolFormat::kLlama3);
    CHECK(named->matches("{\"name\": \"get_time\", \"parameters\": {}}"));
    CHECK_FALSE(
        named->matches("{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_time\", \"parameters\": {}}"));
    CHECK_FALSE(named->matches("{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Paris\"}}"));
    t.choice = ToolChoice::kRequired;
    const auto mistral = tool_call_grammar(t, ToolFormat::kMistral);
    CHECK(mistral->matches(
        "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": {}}]"));
    t.parallel = false;
    CHECK_FALSE(tool_call_grammar(t, ToolFormat::kMistral)
                    ->matches("[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", "
                              "\"arguments\": {}}]"));
}

TEST_CASE("tool calls: strict tools with tool_choice auto get a grammar that starts at the call marker",
          "[tool-calls]") {
    using deskside::server::strict_tool_call_grammar;
    ToolsRequest t = tools();
    t.choice = ToolChoice::kAuto;
    CHECK_FALSE(deskside::server::has_strict_function(t));
    t.functions[0].strict = true;
    CHECK(deskside::server::has_strict_function(t));
    const auto lazy = strict_tool_call_grammar(t, ToolFormat::kHermes, "tools");
    CHECK(lazy.trigger == "<tool_call>");
    // The text after the trigger: the rest of the envelope around a valid call, then more calls.
    const std::string call = "\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>";
    CHECK(lazy.grammar->matches(call));
    CHECK(lazy.grammar->matches(call + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(lazy.grammar->matches("\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(lazy.grammar->matches(call + " and some text"));
    t.parallel = false;
    CHECK_FALSE(strict_tool_call_grammar(t, ToolFormat::kHermes, "tools")
                    .grammar->matches(call + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    // Formats whose call marker the text does not show cannot start a grammar: a 400 on the field.
    for (const ToolFormat f : {ToolFormat::kLlama3, ToolFormat::kMistral, ToolFormat::kGeneric}) {
        try {
            strict_tool_call_grammar(t, f, "tools");
            FAIL("no error for " << deskside::server::tool_format_name(f));
        } catch (const ApiError& e) {
            CHECK(e.status() == 400);
            CHECK(e.param() == "tools");
            CHECK(std::string(e.what()).find("tool_choice \"required\"") != std::string::npos);
        }
    }
    // Where the grammar is lazy, a ```json fenced call (which would escape it) stays content.
    const std::string fenced = "```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```";
    CHECK(parse(fenced, ToolFormat::kHermes, t).calls.size() == 1);
    t.fenced_calls = false;
    const ParsedToolCalls p = parse(fenced, ToolFormat::kHermes, t);
    CHECK(p.calls.empty());
    CHECK(p.content == fenced);
}

TEST_CASE("tool calls: the request's history is what the jinja2 fixtures render", "[tool-calls]") {
    // tests/templates/cases.json's "tools_parallel" holds an OpenAI request next to the messages and
    // tools that jinja2 rendered for every template: the request must normalize to exactly those.
    std::ifstream in(deskside::test::source_path("tests/templates/cases.json"), std::ios::binary);
    const ordered_json spec = ordered_json::parse(in);
    size_t checked = 0;
    for (const ordered_json& c : spec["cases"]) {
        if (!c.contains("openai_request")) continue;
        INFO(c["name"].get<std::string>());
        const ChatRequest r = deskside::server::parse_chat_request(c["openai_request"]);
        CHECK(r.messages.dump() == c["messages"].dump());
        CHECK(r.tools.tools.dump() == c["tools"].dump());
        ++checked;
    }
    CHECK(checked > 0);
}
