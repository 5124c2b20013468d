#include "server/tool_calls.h"

#include <algorithm>
#include <bitset>
#include <random>
#include <utility>

#include "engine/grammar.h"
#include "server/api_error.h"

namespace deskside::server {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\r\n";

using Markers = ToolCallStream::Markers;

Markers markers(ToolFormat f) {
    switch (f) {
        case ToolFormat::kHermes:
        case ToolFormat::kQwen3Xml: return {"<tool_call>", "</tool_call>", ""};
        case ToolFormat::kLlama3: return {"<|python_tag|>", "", "{"};
        case ToolFormat::kMistral: return {"[TOOL_CALLS]", "", "["};
        case ToolFormat::kGeneric: return {"", "", "{["};
    }
    return {};
}

// A call written as a fenced JSON block, in any format: models tuned on other syntaxes than their
// template's (the default model, Qwen2.5-Coder, among them) often answer with one. A fence whose
// body is not a call stays content, byte for byte.
constexpr Markers kFence{"```json", "```", ""};

bool is_space(char c) {
    return kSpace.find(c) != std::string_view::npos;
}

std::string_view trim(std::string_view s) {
    const size_t b = s.find_first_not_of(kSpace);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// The longest proper prefix of `marker` that `text` ends with: bytes that must wait for more text.
size_t partial_marker(std::string_view text, std::string_view marker) {
    if (marker.empty()) return 0;
    for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k)
        if (text.substr(text.size() - k) == marker.substr(0, k)) return k;
    return 0;
}

// Qwen3-Coder's XML call body: <function=NAME> then <parameter=KEY>\nVALUE\n</parameter> per
// argument, then </function>. The markup carries no types: a value is text where the function's
// schema says string (or says nothing), and JSON where it names another type and the text parses.
constexpr std::string_view kXmlFunction = "<function=", kXmlFunctionEnd = "</function>";
constexpr std::string_view kXmlParameter = "<parameter=", kXmlParameterEnd = "</parameter>";

ordered_json xml_parameter_value(std::string_view text, const ordered_json& parameters, const std::string& key) {
    if (text.starts_with('\n')) text.remove_prefix(1);
    if (text.ends_with('\n')) text.remove_suffix(1);
    const ordered_json* type = nullptr;
    if (parameters.is_object() && parameters.contains("properties") && parameters["properties"].contains(key) &&
        parameters["properties"][key].is_object() && parameters["properties"][key].contains("type"))
        type = &parameters["properties"][key]["type"];
    const bool text_only = !type || *type == "string" || (type->is_array() && type->size() == 1 && (*type)[0] == "string");
    if (!text_only) {
        try {
            return ordered_json::parse(text);
        } catch (const nlohmann::json::parse_error&) {
        }
    }
    return std::string(text);
}

// The call as {"name", "arguments"}, or null when the body is not a well-formed call.
ordered_json xml_call(std::string_view body, const ToolsRequest& tools) {
    if (!body.starts_with(kXmlFunction)) return nullptr;
    const size_t gt = body.find('>');
    if (gt == std::string_view::npos) return nullptr;
    const std::string name(body.substr(kXmlFunction.size(), gt - kXmlFunction.size()));
    const ToolFunction* f = tools.find(name);
    if (!f) return nullptr;
    ordered_json args = ordered_json::object();
    std::string_view rest = body.substr(gt + 1);
    for (;;) {
        rest = trim(rest);
        if (rest.starts_with(kXmlFunctionEnd)) break;
        if (!rest.starts_with(kXmlParameter)) return nullptr;
        const size_t key_end = rest.find('>');
        const size_t end = rest.find(kXmlParameterEnd);
        if (key_end == std::string_view::npos || end == std::string_view::npos || end < key_end) return nullptr;
        const std::string key(rest.substr(kXmlParameter.size(), key_end - kXmlParameter.size()));
        args[key] = xml_parameter_value(rest.substr(key_end + 1, end - key_end - 1), f->parameters, key);
        rest.remove_prefix(end + kXmlParameterEnd.size());
    }
    if (!trim(rest.substr(kXmlFunctionEnd.size())).empty()) return nullptr;
    return {{"name", name}, {"arguments", std::move(args)}};
}

std::string random_chars(std::string prefix, size_t n) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr std::string_view kAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t i = 0; i < n; ++i) prefix += kAlnum[rng() % kAlnum.size()];
    return prefix;
}

}  // namespace

std::optional<ToolFormat> tool_format_from_name(std::string_view name) {
    for (const ToolFormat f :
         {ToolFormat::kHermes, ToolFormat::kQwen3Xml, ToolFormat::kLlama3, ToolFormat::kMistral, ToolFormat::kGeneric})
        if (name == tool_format_name(f)) return f;
    return std::nullopt;
}

const char* tool_format_name(ToolFormat f) {
    switch (f) {
        case ToolFormat::kHermes: return "hermes";
        case ToolFormat::kQwen3Xml: return "qwen3_coder";
        case ToolFormat::kLlama3: return "llama3";
        case ToolFormat::kMistral: return "mistral";
        case ToolFormat::kGeneric: return "generic";
    }
    return "generic";
}

ToolFormat detect_tool_format(std::string_view source) {
    const auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
    if (has("<tool_call>")) return has("<function=") && has("<parameter=") ? ToolFormat::kQwen3Xml : ToolFormat::kHermes;
    if (has("[TOOL_CALLS]")) return ToolFormat::kMistral;
    // Llama 3.1 names <|python_tag|>; 3.2 and 3.3 only show the JSON they expect after the header.
    if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\": "))) return ToolFormat::kLlama3;
    return ToolFormat::kGeneric;
}

const ToolCallSyntax& tool_call_syntax(ToolFormat f) {
    // What each template shows the model (and renders for earlier calls in the history).
    static const ToolCallSyntax kHermes{"<tool_call>\n", "\n</tool_call>", "\n", "arguments", true};
    static const ToolCallSyntax kLlama3{"", "", "; ", "parameters", false};
    static const ToolCallSyntax kMistral{"[TOOL_CALLS][", "]", ", ", "arguments", false};
    static const ToolCallSyntax kGeneric{"[", "]", ", ", "arguments", false};
    switch (f) {
        case ToolFormat::kHermes:
        case ToolFormat::kQwen3Xml: return kHermes;
        case ToolFormat::kLlama3: return kLlama3;
        case ToolFormat::kMistral: return kMistral;
        case ToolFormat::kGeneric: return kGeneric;
    }
    return kGeneric;
}

std::string new_tool_call_id(ToolFormat f) {
    return f == ToolFormat::kMistral ? random_chars("", 9) : random_chars("call_", 24);
}

ToolCallStream::ToolCallStream(ToolFormat format, const ToolsRequest& tools, IdSource id)
    : format_(format), tools_(tools), id_(std::move(id)) {
    if (!id_) id_ = [format] { return new_tool_call_id(format); };
}

std::vector<ToolCallEvent> ToolCallStream::feed(std::string_view text) {
    std::vector<ToolCallEvent> out;
    buf_ += text;
    run(false, out);
    return out;
}

std::vector<ToolCallEvent> ToolCallStream::finish() {
    std::vector<ToolCallEvent> out;
    run(true, out);
    if (!held_space_.empty()) {  // trailing whitespace of the answer is content like any other
        if (!out.empty() && !out.back().call) {
            out.back().content += held_space_;
        } else {
            out.push_back({held_space_, std::nullopt, 0});
        }
        held_space_.clear();
    }
    return out;
}

void ToolCallStream::run(bool final, std::vector<ToolCallEvent>& out) {
    for (;;) {
        bool progress = false;
        switch (state_) {
            case State::kText: progress = step_text(final, out); break;
            case State::kTagged: progress = step_tagged(final, out); break;
            case State::kJson: progress = step_json(final, out); break;
            case State::kAfterCall: progress = step_after_call(); break;
        }
        if (!progress) return;
    }
}

void ToolCallStream::content(std::string text, std::vector<ToolCallEvent>& out) {
    if (text.empty()) return;
    text.insert(0, held_space_);
    held_space_.clear();
    const size_t last = text.find_last_not_of(kSpace);
    if (last == std::string::npos) {
        held_space_ = std::move(text);
        return;
    }
    held_space_ = text.substr(last + 1);
    text.resize(last + 1);
    at_start_ = false;
    if (!out.empty() && !out.back().call) {
        out.back().content += text;
    } else {
        out.push_back({std::move(text), std::nullopt, 0});
    }
}

bool ToolCallStream::step_text(bool final, std::vector<ToolCallEvent>& out) {
    if (skip_space_) {
        const size_t b = buf_.find_first_not_of(kSpace);
        buf_.erase(0, b == std::string::npos ? buf_.size() : b);
        if (buf_.empty()) return false;
        skip_space_ = false;
    }
    if (buf_.empty()) return false;
    const Markers m = markers(format_);
    if (at_start_ && !m.bare.empty()) {
        const size_t i = buf_.find_first_not_of(kSpace);
        if (i == std::string::npos) {  // only whitespace yet: it is held either way
            content(std::exchange(buf_, {}), out);
            return false;
        }
        // Mistral's marker itself opens with '[': it is the marker, not a bare list, while it may be.
        const std::string_view rest = std::string_view(buf_).substr(i);
        const bool maybe_marker =
            !m.open.empty() && (rest.starts_with(m.open) || (!final && m.open.starts_with(rest)));
        if (!maybe_marker && m.bare.find(buf_[i]) != std::string_view::npos) {
            content(buf_.substr(0, i), out);
            buf_.erase(0, i);
            start_json("");
            return true;
        }
    }
    // The earliest opening: the format's own marker, or a ```json fence.
    size_t pos = std::string::npos;
    Markers opened;
    for (const Markers& candidate : {m, kFence}) {
        if (candidate.open.empty() || (candidate.open == kFence.open && !tools_.fenced_calls)) continue;
        if (const size_t p = buf_.find(candidate.open); p < pos) {
            pos = p;
            opened = candidate;
        }
    }
    if (pos != std::string::npos) {
        content(buf_.substr(0, pos), out);
        buf_.erase(0, pos + opened.open.size());
        if (opened.close.empty()) {
            start_json(opened.open);
        } else {
            call_text_ = std::string(opened.open);
            tag_ = opened;
            state_ = State::kTagged;
        }
        return true;
    }
    const size_t keep = final ? 0 : std::max(partial_marker(buf_, m.open), partial_marker(buf_, kFence.open));
    content(buf_.substr(0, buf_.size() - keep), out);
    buf_.erase(0, buf_.size() - keep);
    return false;
}

void ToolCallStream::start_json(std::string_view marker) {
    call_text_ = std::string(marker);
    body_start_ = marker.size();
    depth_ = 0;
    in_string_ = escaped_ = false;
    state_ = State::kJson;
}

bool ToolCallStream::step_tagged(bool final, std::vector<ToolCallEvent>& out) {
    const Markers& m = tag_;
    // The close marker may straddle the old and the new text: search from just before the seam.
    const size_t from = std::max(m.open.size(), call_text_.size() - std::min(call_text_.size(), m.close.size() - 1));
    call_text_ += buf_;
    buf_.clear();
    const size_t pos = call_text_.find(m.close, from);
    if (pos == std::string::npos && !final) return false;
    const size_t body_end = pos == std::string::npos ? call_text_.size() : pos;
    if (pos != std::string::npos) {
        buf_ = call_text_.substr(pos + m.close.size());
        call_text_.resize(pos + m.close.size());
    }
    if (accept_calls(trim(std::string_view(call_text_).substr(m.open.size(), body_end - m.open.size())), out)) {
        state_ = State::kText;
    } else {
        reject(out);
    }
    return true;
}

bool ToolCallStream::step_json(bool final, std::vector<ToolCallEvent>& out) {
    for (size_t i = 0; i < buf_.size(); ++i) {
        const char c = buf_[i];
        if (depth_ == 0) {  // before the value: whitespace, then it must open an object or array
            if (is_space(c)) continue;
            if (c != '{' && c != '[') {
                call_text_ += buf_.substr(0, i);
                buf_.erase(0, i);
                reject(out);
                return true;
            }
        }
        if (in_string_) {
            if (escaped_) {
                escaped_ = false;
            } else if (c == '\\') {
                escaped_ = true;
            } else if (c == '"') {
                in_string_ = false;
            }
        } else if (c == '"') {
            in_string_ = true;
        } else if (c == '{' || c == '[') {
            ++depth_;
        } else if ((c == '}' || c == ']') && --depth_ == 0) {
            call_text_ += buf_.substr(0, i + 1);
            buf_.erase(0, i + 1);
            if (accept_calls(std::string_view(call_text_).substr(body_start_), out)) {
                state_ = format_ == ToolFormat::kLlama3 ? State::kAfterCall : State::kText;
            } else {
                reject(out);
            }
            return true;
        }
    }
    call_text_ += buf_;
    buf_.clear();
    if (!final) return false;
    reject(out);  // the text ended inside the JSON value
    return true;
}

bool ToolCallStream::step_after_call() {
    // Llama writes several calls as JSON objects separated by ';'.
    const size_t b = buf_.find_first_not_of(kSpace);
    buf_.erase(0, b == std::string::npos ? buf_.size() : b);
    if (buf_.empty()) return false;
    if (buf_[0] == ';') {
        buf_.erase(0, 1);
        return true;
    }
    if (buf_[0] == '{') {
        start_json("");
        return true;
    }
    state_ = State::kText;
    return true;
}

bool ToolCallStream::accept_calls(std::string_view body, std::vector<ToolCallEvent>& out) {
    ordered_json v;
    if (format_ == ToolFormat::kQwen3Xml && body.starts_with(kXmlFunction)) {
        v = xml_call(body, tools_);
        if (v.is_null()) return false;
    } else {
        try {
            v = ordered_json::parse(body);
        } catch (const nlohmann::json::parse_error&) {
            return false;
        }
    }
    std::vector<ordered_json> items;
    if (v.is_array()) {
        for (auto& x : v) items.push_back(std::move(x));
    } else {
        items.push_back(std::move(v));
    }
    if (items.empty()) return false;
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
    for (const ordered_json& item : items) {
        if (!item.is_object()) return false;
        const auto name = item.find("name");
        if (name == item.end() || !name->is_string() || !tools_.find(name->get<std::string>())) return false;
        auto args = item.find("arguments");
        if (args == item.end()) args = item.find("parameters");
        ordered_json a = args == item.end() ? ordered_json::object() : *args;
        if (a.is_string()) {  // some models write the arguments as OpenAI sends them: encoded
            try {
                a = ordered_json::parse(a.get<std::string>());
            } catch (const nlohmann::json::parse_error&) {
                return false;
            }
        }
        if (!a.is_object()) return false;
        calls.emplace_back(name->get<std::string>(), a.dump());
    }
    for (auto& [name, args] : calls) {
        if (!tools_.parallel && n_calls_ > 0) break;
        out.push_back({{}, ToolCall{id_(), std::move(name), std::move(args)}, n_calls_++});
    }
    held_space_.clear();
    call_text_.clear();
    at_start_ = false;
    skip_space_ = true;
    return true;
}

void ToolCallStream::reject(std::vector<ToolCallEvent>& out) {
    state_ = State::kText;
    std::string text = std::exchange(call_text_, {});
    // A rejected bare value at the start no longer counts as the start, so it is not retried.
    content(std::move(text), out);
    at_start_ = false;
}

ParsedToolCalls parse_tool_calls(std::string_view text, ToolFormat format, const ToolsRequest& tools,
                                 ToolCallStream::IdSource id) {
    ToolCallStream stream(format, tools, std::move(id));
    std::vector<ToolCallEvent> events = stream.feed(text);
    for (ToolCallEvent& e : stream.finish()) events.push_back(std::move(e));
    ParsedToolCalls parsed;
    for (ToolCallEvent& e : events) {
        if (e.call) {
            parsed.calls.push_back(std::move(*e.call));
        } else {
            parsed.content += e.content;
        }
    }
    return parsed;
}

namespace {

// A string parameter's value as Qwen3-Coder writes it: raw text without '<' (which would open the
// closing tag), an enum's or const's values verbatim, lengths counted on printable ASCII so that
// bytes are characters. A pattern or format cannot be enforced on raw text: SchemaError.
engine::GrammarBuilder::Rule xml_text_value(engine::GrammarBuilder& b, const ordered_json& sub, const std::string& path) {
    using Rule = engine::GrammarBuilder::Rule;
    for (const char* keyword : {"pattern", "format"})
        if (sub.contains(keyword))
            throw engine::SchemaError(path + "." + keyword, keyword, "not enforceable on an XML parameter's text");
    if (sub.contains("const") || sub.contains("enum")) {
        std::vector<Rule> values;
        for (const ordered_json& v : sub.contains("const") ? ordered_json::array({sub["const"]}) : sub["enum"]) {
            if (!v.is_string()) throw engine::SchemaError(path + ".enum", "enum", "a string parameter's values must be strings");
            values.push_back(b.literal(v.get<std::string>()));
        }
        return values.size() == 1 ? values[0] : b.choice(std::move(values));
    }
    std::bitset<256> bytes;
    if (sub.contains("minLength") || sub.contains("maxLength")) {
        for (int c = ' '; c < 0x7f; ++c) bytes.set(c);
    } else {
        bytes.set();
    }
    bytes.reset('<');
    const int64_t lo = sub.value("minLength", int64_t{1}), hi = sub.value("maxLength", int64_t{-1});
    return b.repeat(b.byte_set(bytes), lo, hi);
}

// Qwen3-Coder's call body for `f`: every property of its schema in order (required ones always),
// string values as text (xml_text_value), other values as JSON valid against the property's
// schema. Throws engine::SchemaError as GrammarBuilder::json_schema does.
engine::GrammarBuilder::Rule xml_call_rule(engine::GrammarBuilder& b, const ToolFunction& f,
                                           const ordered_json& schema) {
    using Rule = engine::GrammarBuilder::Rule;
    std::vector<Rule> parts{b.literal(std::string(kXmlFunction) + f.name + ">\n")};
    const ordered_json properties = schema.value("properties", ordered_json::object());
    const ordered_json required = schema.value("required", ordered_json::array());
    for (const auto& [key, sub] : properties.items()) {
        const bool is_text = sub.is_object() && sub.value("type", ordered_json()) == "string";
        const Rule value = is_text ? xml_text_value(b, sub, "properties." + key) : b.json_schema(sub);
        const Rule one = b.sequence({b.literal(std::string(kXmlParameter) + key + ">\n"), value,
                                     b.literal("\n" + std::string(kXmlParameterEnd) + "\n")});
        const bool needed = std::find(required.begin(), required.end(), ordered_json(key)) != required.end();
        parts.push_back(needed ? one : b.repeat(one, 0, 1));
    }
    parts.push_back(b.literal(std::string(kXmlFunctionEnd)));
    return b.sequence(std::move(parts));
}

}  // namespace

namespace {

using Rule = engine::GrammarBuilder::Rule;

// `before`, `middle`, `after` in sequence (empty literals left out).
Rule in_sequence(engine::GrammarBuilder& b, std::string_view before, Rule middle, std::string_view after) {
    std::vector<Rule> parts;
    if (!before.empty()) parts.push_back(b.literal(before));
    parts.push_back(middle);
    if (!after.empty()) parts.push_back(b.literal(after));
    return parts.size() == 1 ? middle : b.sequence(std::move(parts));
}

// One call of any of the request's functions (the forced one for a named tool_choice), its
// arguments valid against the function's parameters. `strict_only`: a function that is not strict
// and whose parameters cannot be enforced takes any JSON object instead of a 400.
Rule call_rule(engine::GrammarBuilder& b, const ToolsRequest& tools, ToolFormat format, bool strict_only) {
    const ToolCallSyntax& syntax = tool_call_syntax(format);
    std::vector<Rule> calls;
    for (size_t i = 0; i < tools.functions.size(); ++i) {
        const ToolFunction& f = tools.functions[i];
        if (tools.choice == ToolChoice::kNamed && f.name != tools.forced) continue;
        const nlohmann::ordered_json schema =
            f.parameters.is_null() ? nlohmann::ordered_json{{"type", "object"}} : f.parameters;
        const std::string head =
            "{\"name\": " + ordered_json(f.name).dump() + ", \"" + std::string(syntax.arguments_key) + "\": ";
        try {
            calls.push_back(format == ToolFormat::kQwen3Xml ? xml_call_rule(b, f, schema)
                                                            : in_sequence(b, head, b.json_schema(schema), "}"));
        } catch (const engine::SchemaError& e) {
            if (strict_only && !f.strict) {
                if (format == ToolFormat::kQwen3Xml)
                    calls.push_back(xml_call_rule(b, f, nlohmann::ordered_json{{"type", "object"}}));
                else
                    calls.push_back(in_sequence(b, head, b.any_json_object(), "}"));
                continue;
            }
            const std::string param = tools.legacy ? "functions[" + std::to_string(i) + "].parameters"
                                                   : "tools[" + std::to_string(i) + "].function.parameters";
            throw invalid_param(param, "'" + param + "' cannot be enforced" +
                                           std::string(strict_only ? " for a strict tool" : " for tool_choice") +
                                           ": " + e.what());
        }
    }
    return calls.size() == 1 ? calls[0] : b.choice(calls);
}

}  // namespace

std::shared_ptr<const engine::Grammar> tool_call_grammar(const ToolsRequest& tools, ToolFormat format) {
    const ToolCallSyntax& syntax = tool_call_syntax(format);
    engine::GrammarBuilder b;
    const Rule call = call_rule(b, tools, format, false);
    const int64_t max_calls = tools.choice == ToolChoice::kRequired && tools.parallel ? -1 : 1;
    const Rule separator = b.literal(syntax.separator);
    if (syntax.per_call) return b.build(b.repeat(in_sequence(b, syntax.begin, call, syntax.end), 1, max_calls, separator));
    return b.build(in_sequence(b, syntax.begin, b.repeat(call, 1, max_calls, separator), syntax.end));
}

bool has_strict_function(const ToolsRequest& tools) {
    return std::any_of(tools.functions.begin(), tools.functions.end(), [](const ToolFunction& f) { return f.strict; });
}

LazyToolGrammar strict_tool_call_grammar(const ToolsRequest& tools, ToolFormat format, std::string_view param) {
    // The trigger must be text the model prints: Hermes/Qwen's <tool_call> is. Llama 3's calls are
    // bare JSON (or follow <|python_tag|>, a control token the text never shows) and Mistral's
    // [TOOL_CALLS] is a control token too, so nothing in their text marks a call's start.
    if (format != ToolFormat::kHermes && format != ToolFormat::kQwen3Xml)
        throw ApiError(400,
                       "strict tools with tool_choice \"auto\" are enforced only for call formats with a printed "
                       "marker (hermes, qwen3_coder); this model's is " + std::string(tool_format_name(format)) +
                           ": use tool_choice \"required\" or a named function (enforced in every format), or "
                           "strict: false",
                       std::string(param), "unsupported_parameter");
    const ToolCallSyntax& syntax = tool_call_syntax(format);
    constexpr std::string_view kTrigger = "<tool_call>";
    engine::GrammarBuilder b;
    const Rule call = call_rule(b, tools, format, true);
    // After the trigger: the rest of the first call's envelope, then (with parallel_tool_calls)
    // more calls; the answer ends after the last one, as the required grammar's does.
    const Rule first = in_sequence(b, syntax.begin.substr(kTrigger.size()), call, syntax.end);
    const Rule more = b.sequence({b.literal(syntax.separator), in_sequence(b, syntax.begin, call, syntax.end)});
    const Rule root = tools.parallel ? b.sequence({first, b.repeat(more, 0, -1)}) : first;
    return {b.build(root), std::string(kTrigger)};
}

}  // namespace deskside::server
