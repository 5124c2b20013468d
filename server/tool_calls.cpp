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
    std::vector<Rule> parts{b.literal(std::string(qwen3_xml::kFunction) + f.name + ">\n")};
    const ordered_json properties = schema.value("properties", ordered_json::object());
    const ordered_json required = schema.value("required", ordered_json::array());
    for (const auto& [key, sub] : properties.items()) {
        const bool is_text = sub.is_object() && sub.value("type", ordered_json()) == "string";
        const Rule value = is_text ? xml_text_value(b, sub, "properties." + key) : b.json_schema(sub);
        const Rule one = b.sequence({b.literal(std::string(qwen3_xml::kParameter) + key + ">\n"), value,
                                     b.literal("\n" + std::string(qwen3_xml::kParameterEnd) + "\n")});
        const bool needed = std::find(required.begin(), required.end(), ordered_json(key)) != required.end();
        parts.push_back(needed ? one : b.repeat(one, 0, 1));
    }
    parts.push_back(b.literal(std::string(qwen3_xml::kFunctionEnd)));
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
