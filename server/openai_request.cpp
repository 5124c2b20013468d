#include "server/openai_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "server/api_error.h"

namespace deskside::server {
namespace {

using nlohmann::json;

std::string type_name(const json& v) {
    if (v.is_number_integer()) return "integer";
    if (v.is_number()) return "number";
    return v.type_name();
}

ApiError wrong_type(const std::string& param, const std::string& expected, const json& v) {
    return ApiError(400, "'" + param + "' must be " + expected + ", got " + type_name(v), param, "invalid_type");
}

double number_in(const json& v, const std::string& param, double lo, double hi) {
    if (!v.is_number()) throw wrong_type(param, "a number", v);
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        throw invalid_param(param, "'" + param + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                                       ", got " + v.dump());
    return x;
}

int64_t integer_in(const json& v, const std::string& param, int64_t lo, int64_t hi) {
    if (!v.is_number_integer()) throw wrong_type(param, "an integer", v);
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
        throw invalid_param(param, "'" + param + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
        throw invalid_param(param, "'" + param + "' must be between " + std::to_string(lo) + " and " +
                                       std::to_string(hi) + ", got " + std::to_string(x));
    return x;
}

bool boolean(const json& v, const std::string& param) {
    if (!v.is_boolean()) throw wrong_type(param, "a boolean", v);
    return v.get<bool>();
}

std::vector<std::string> parse_stop(const json& v) {
    if (v.is_string()) {
        // An empty stop sequence would match at once and empty every output (as [""] would).
        if (v.get_ref<const std::string&>().empty()) throw invalid_param("stop", "'stop' must not be empty");
        return {v.get<std::string>()};
    }
    if (!v.is_array()) throw wrong_type("stop", "a string or an array of strings", v);
    if (v.size() > 4) throw invalid_param("stop", "'stop' takes at most 4 sequences");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "stop[" + std::to_string(i) + "]";
        if (!v[i].is_string()) throw wrong_type(p, "a string", v[i]);
        if (v[i].get<std::string>().empty()) throw invalid_param(p, "'" + p + "' must not be empty");
        out.push_back(v[i].get<std::string>());
    }
    return out;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& v) {
    if (!v.is_object()) throw wrong_type("logit_bias", "an object mapping token ids to biases", v);
    std::vector<std::pair<int32_t, float>> out;
    for (const auto& [key, bias] : v.items()) {
        const std::string p = "logit_bias." + key;
        size_t used = 0;
        long long id = -1;
        try {
            id = std::stoll(key, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != key.size() || id < 0 || id > INT32_MAX) throw invalid_param(p, "logit_bias key '" + key + "' is not a token id");
        out.emplace_back(static_cast<int32_t>(id), static_cast<float>(number_in(bias, p, -100, 100)));
    }
    return out;
}

// Fields shared by both endpoints; returns false when `key` is not one of them.
bool parse_common(const std::string& key, const json& v, GenerationRequest& g, bool chat) {
    if (key == "model") {
        if (!v.is_string()) throw wrong_type("model", "a string", v);
        g.model = v.get<std::string>();
    } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
        g.max_tokens = integer_in(v, key, chat ? 1 : 0, INT32_MAX);
    } else if (key == "temperature") {
        g.temperature = number_in(v, key, 0, 2);
    } else if (key == "top_p") {
        g.top_p = number_in(v, key, 0, 1);
    } else if (key == "n") {
        g.n = integer_in(v, key, 1, 16);
    } else if (key == "stop") {
        g.stop = parse_stop(v);
    } else if (key == "seed") {
        g.seed = static_cast<uint64_t>(integer_in(v, key, INT64_MIN, INT64_MAX));
    } else if (key == "presence_penalty") {
        g.presence_penalty = number_in(v, key, -2, 2);
    } else if (key == "frequency_penalty") {
        g.frequency_penalty = number_in(v, key, -2, 2);
    } else if (key == "top_k") {  // vLLM: -1 (or 0) is the whole vocabulary
        g.top_k = integer_in(v, key, -1, INT32_MAX);
    } else if (key == "min_p") {
        g.min_p = number_in(v, key, 0, 1);
    } else if (key == "typical_p") {
        g.typical_p = number_in(v, key, 0, 1);
        if (g.typical_p <= 0) throw invalid_param(key, "'typical_p' must be greater than 0");
    } else if (key == "repetition_penalty") {
        g.repetition_penalty = number_in(v, key, 0, 10);
        if (g.repetition_penalty <= 0) throw invalid_param(key, "'repetition_penalty' must be greater than 0");
    } else if (key == "logit_bias") {
        g.logit_bias = parse_logit_bias(v);
    } else if (key == "stream") {
        g.stream = boolean(v, key);
    } else if (key == "stream_options") {
        if (!v.is_object()) throw wrong_type(key, "an object", v);
        for (const auto& [k, x] : v.items()) {
            if (k != "include_usage") throw invalid_param("stream_options." + k, "unknown field 'stream_options." + k + "'");
            if (!x.is_null()) g.include_usage = boolean(x, "stream_options.include_usage");
        }
    } else if (key == "user" || key == "safety_identifier" || key == "prompt_cache_key") {
        // Identifiers that change nothing here: prefix caching is automatic, no abuse tracking.
        if (!v.is_string()) throw wrong_type(key, "a string", v);
    } else if (key == "ignore_eos") {  // an extension vLLM and llama.cpp share; benchmarks use it
        g.ignore_eos = boolean(v, key);
    } else {
        return false;
    }
    return true;
}

void finish_common(const json& body, GenerationRequest& g) {
    if (g.model.empty()) throw ApiError(400, "'model' is required", "model", "missing_required_parameter");
    if (g.include_usage && !g.stream)
        throw invalid_param("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (g.top_logprobs > 0 && !g.logprobs && body.contains("top_logprobs"))
        throw invalid_param("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
}

// Parameters OpenAI defines that we cannot honour: named so the error says why.
const std::set<std::string> kUnsupportedChat = {
    "audio", "modalities", "prediction", "web_search_options", "service_tier", "store", "verbosity"};
const std::set<std::string> kUnsupportedCompletion = {"best_of"};

ResponseFormat parse_response_format(const nlohmann::ordered_json& v) {
    if (!v.is_object()) throw ApiError(400, "'response_format' must be an object", "response_format", "invalid_type");
    const auto t = v.find("type");
    if (t == v.end() || !t->is_string()) throw invalid_param("response_format.type", "'response_format.type' is required");
    const auto only = [&](std::initializer_list<const char*> keys) {
        for (const auto& [k, x] : v.items())
            if (std::find(keys.begin(), keys.end(), k) == keys.end())
                throw invalid_param("response_format." + k, "unknown field 'response_format." + k + "'");
    };
    ResponseFormat f;
    const std::string type = t->get<std::string>();
    if (type == "text") {
        only({"type"});
    } else if (type == "json_object") {
        only({"type"});
        f.kind = ResponseFormat::Kind::kJsonObject;
    } else if (type == "json_schema") {
        only({"type", "json_schema"});
        f.kind = ResponseFormat::Kind::kJsonSchema;
        const auto js = v.find("json_schema");
        const std::string p = "response_format.json_schema";
        if (js == v.end() || !js->is_object()) throw invalid_param(p, "'" + p + "' is required and must be an object");
        for (const auto& [k, x] : js->items()) {
            const std::string fp = p + "." + k;
            if (k == "name") {
                if (!x.is_string()) throw invalid_param(fp, "'" + fp + "' must be a string");
                f.name = x.get<std::string>();
            } else if (k == "schema") {
                if (!x.is_object() && !x.is_boolean()) throw invalid_param(fp, "'" + fp + "' must be a JSON Schema object");
                f.schema = x;
            } else if (k == "strict") {
                if (!x.is_boolean() && !x.is_null()) throw invalid_param(fp, "'" + fp + "' must be a boolean");
                f.strict = x.is_boolean() && x.get<bool>();
            } else if (k == "description") {
                if (!x.is_string()) throw invalid_param(fp, "'" + fp + "' must be a string");
            } else {
                throw invalid_param(fp, "unknown field '" + fp + "'");
            }
        }
        // OpenAI's rule for the name: a-z, A-Z, 0-9, _ and -, at most 64.
        const bool name_ok = !f.name.empty() && f.name.size() <= 64 &&
                             std::all_of(f.name.begin(), f.name.end(), [](char c) {
                                 return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                             });
        if (!name_ok) throw invalid_param(p + ".name", "'" + p + ".name' is required: 1 to 64 of a-z, A-Z, 0-9, _ and -");
    } else {
        throw invalid_param("response_format.type", "'response_format.type' must be text, json_object or json_schema, got '" +
                                                         type + "'");
    }
    return f;
}

void require_object(const json& body) {
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object, got " + type_name(body), "", "invalid_type");
}

std::string message_content(const json& content, const std::string& path) {
    return joined_text(content, path, {"text"}, {"type", "text"}, "content part");
}

using ordered_json = nlohmann::ordered_json;

ApiError missing(const std::string& param) {
    return ApiError(400, "'" + param + "' is required", param, "missing_required_parameter");
}

void reject_unknown(const std::string& path, const std::string& key) {
    throw invalid_param(path + "." + key, "unknown field '" + path + "." + key + "'");
}

std::string required_string(const json& obj, const std::string& key, const std::string& path) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) throw missing(path + "." + key);
    if (!it->is_string()) throw wrong_type(path + "." + key, "a string", *it);
    return it->get<std::string>();
}

// A call's arguments as templates want them: the JSON object the client's string encodes
// (an empty string is a call without arguments). Decoded as ordered_json to keep key order.
ordered_json decode_arguments(const std::string& text, const std::string& path) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return ordered_json::object();
    ordered_json args;
    try {
        args = ordered_json::parse(text);
    } catch (const nlohmann::json::parse_error&) {
        throw invalid_param(path, "'" + path + "' must be a JSON object encoded as a string; it is not valid JSON");
    }
    if (!args.is_object())
        throw invalid_param(path, "'" + path + "' must encode a JSON object, got " + type_name(args));
    return args;
}

// {"name", "arguments": string} of a tool call or a legacy function_call, as HF's function object.
ordered_json call_function(const json& f, const std::string& path) {
    if (!f.is_object()) throw wrong_type(path, "an object", f);
    for (const auto& [k, x] : f.items())
        if (k != "name" && k != "arguments") reject_unknown(path, k);
    ordered_json out = ordered_json::object();
    out["name"] = required_string(f, "name", path);
    out["arguments"] = decode_arguments(required_string(f, "arguments", path), path + ".arguments");
    return out;
}

ordered_json parse_tool_calls(const json& v, const std::string& path) {
    if (!v.is_array()) throw wrong_type(path, "an array", v);
    ordered_json calls = ordered_json::array();
    for (size_t j = 0; j < v.size(); ++j) {
        const std::string p = path + "[" + std::to_string(j) + "]";
        const json& c = v[j];
        if (!c.is_object()) throw wrong_type(p, "an object", c);
        for (const auto& [k, x] : c.items())
            if (k != "id" && k != "type" && k != "function") reject_unknown(p, k);
        ordered_json call = ordered_json::object();
        call["id"] = required_string(c, "id", p);
        if (required_string(c, "type", p) != "function")
            throw unsupported(p + ".type", "tool call type '" + c["type"].get<std::string>() + "'");
        call["type"] = "function";
        if (!c.contains("function")) throw missing(p + ".function");
        call["function"] = call_function(c["function"], p + ".function");
        calls.push_back(std::move(call));
    }
    return calls;
}

// The id given to a legacy function_call turn (which has none): nine alphanumerics, the one
// id shape every template accepts (Mistral's insists on it).
std::string legacy_call_id(size_t message_index) {
    std::string digits = std::to_string(message_index);
    return "call" + std::string(5 - std::min<size_t>(5, digits.size()), '0') + digits;
}

nlohmann::ordered_json parse_messages(const json& v) {
    if (!v.is_array()) throw wrong_type("messages", "an array", v);
    if (v.empty()) throw invalid_param("messages", "'messages' must not be empty");
    ordered_json out = ordered_json::array();
    std::set<std::string> call_ids;    // of the tool calls so far: a tool result must answer one
    std::string last_legacy_call;      // the id a following role "function" turn answers
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "messages[" + std::to_string(i) + "]";
        const json& m = v[i];
        if (!m.is_object()) throw wrong_type(p, "an object", m);
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string()) throw invalid_param(p + ".role", "'" + p + ".role' must be a string");
        std::string r = role->get<std::string>();
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool" && r != "function")
            throw invalid_param(p + ".role", "'" + p + ".role' must be system, developer, user, assistant, tool or " +
                                                 "function, got '" + r + "'");
        ordered_json msg;
        msg["role"] = r == "developer" ? "system" : r == "function" ? "tool" : r;
        std::string content;
        ordered_json tool_calls = ordered_json::array();
        for (const auto& [k, x] : m.items()) {
            const std::string fp = p + "." + k;
            if (k == "role") continue;
            if (k == "content") {
                if (x.is_null() && r == "assistant") continue;
                content = message_content(x, fp);
            } else if (k == "name") {
                if (!x.is_string()) throw wrong_type(fp, "a string", x);
                msg["name"] = x.get<std::string>();
            } else if (k == "tool_call_id" && r == "tool") {
                if (!x.is_string()) throw wrong_type(fp, "a string", x);
                msg["tool_call_id"] = x.get<std::string>();
            } else if (k == "tool_calls" && r == "assistant") {
                if (!x.is_null()) tool_calls = parse_tool_calls(x, fp);
            } else if (k == "function_call" && r == "assistant") {
                if (x.is_null()) continue;
                last_legacy_call = legacy_call_id(i);
                tool_calls.push_back(
                    {{"id", last_legacy_call}, {"type", "function"}, {"function", call_function(x, fp)}});
            } else if (k == "audio") {
                if (!x.is_null()) throw unsupported(fp, "'" + k + "' in messages");
            } else if (k == "refusal" && r == "assistant") {
                if (!x.is_null() && !x.is_string()) throw wrong_type(fp, "a string", x);
            } else {
                throw invalid_param(fp, "unknown field '" + fp + "'");
            }
        }
        if (!m.contains("content") && r != "assistant") throw invalid_param(p + ".content", "'" + p + ".content' is required");
        const auto given = [&](const char* k) { return m.contains(k) && !m[k].is_null(); };
        if (given("tool_calls") && given("function_call"))
            throw invalid_param(p + ".function_call",
                                "give '" + p + ".tool_calls' or the legacy 'function_call', not both");
        if (r == "tool") {
            if (!msg.contains("tool_call_id")) throw missing(p + ".tool_call_id");
            if (!call_ids.count(msg["tool_call_id"].get<std::string>()))
                throw invalid_param(p + ".tool_call_id",
                                    "'" + p + ".tool_call_id' must answer a tool call of an earlier assistant message");
        } else if (r == "function") {
            if (!msg.contains("name")) throw missing(p + ".name");
            if (last_legacy_call.empty())
                throw invalid_param(p, "a 'function' message must follow an assistant message with a 'function_call'");
            msg["tool_call_id"] = last_legacy_call;
        }
        msg["content"] = content;
        // Templates test `tool_calls is defined` (or `'tool_calls' in message`): only calls make the key.
        if (!tool_calls.empty()) {
            for (const auto& c : tool_calls) call_ids.insert(c["id"].get<std::string>());
            msg["tool_calls"] = std::move(tool_calls);
        }
        out.push_back(std::move(msg));
    }
    return out;
}

// OpenAI's rule for function names.
bool valid_function_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (const char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
    return true;
}

// One function definition; `rendered` gets it as the template sees it (null-valued keys dropped,
// since a template would print them as None).
ToolFunction parse_function(const ordered_json& f, const std::string& path, ordered_json& rendered) {
    if (!f.is_object()) throw wrong_type(path, "an object", f);
    ToolFunction out;
    rendered = ordered_json::object();
    for (const auto& [k, x] : f.items()) {
        const std::string fp = path + "." + k;
        if (x.is_null()) continue;
        if (k == "name") {
            if (!x.is_string()) throw wrong_type(fp, "a string", json(x));
            out.name = x.get<std::string>();
            if (!valid_function_name(out.name))
                throw invalid_param(fp, "'" + fp + "' must be 1 to 64 characters of a-z, A-Z, 0-9, '_' and '-', got '" +
                                            out.name + "'");
        } else if (k == "description") {
            if (!x.is_string()) throw wrong_type(fp, "a string", json(x));
        } else if (k == "parameters") {
            if (!x.is_object()) throw wrong_type(fp, "a JSON Schema object", json(x));
            out.parameters = x;
        } else if (k == "strict") {
            out.strict = boolean(json(x), fp);
        } else {
            reject_unknown(path, k);
        }
        rendered[k] = x;
    }
    if (out.name.empty()) throw missing(path + ".name");
    return out;
}

void add_function(ToolsRequest& t, ToolFunction f, const std::string& path) {
    if (t.find(f.name)) throw invalid_param(path + ".name", "function name '" + f.name + "' is given twice");
    t.functions.push_back(std::move(f));
}

void parse_tools(const ordered_json& v, ToolsRequest& t) {
    if (!v.is_array()) throw wrong_type("tools", "an array", json(v));
    if (v.empty()) throw invalid_param("tools", "'tools' must not be empty");
    t.tools = ordered_json::array();
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "tools[" + std::to_string(i) + "]";
        const ordered_json& tool = v[i];
        if (!tool.is_object()) throw wrong_type(p, "an object", json(tool));
        const auto type = tool.find("type");
        if (type == tool.end() || !type->is_string()) throw missing(p + ".type");
        if (*type != "function") throw unsupported(p + ".type", "tool type '" + type->get<std::string>() + "'");
        for (const auto& [k, x] : tool.items())
            if (k != "type" && k != "function") reject_unknown(p, k);
        if (!tool.contains("function")) throw missing(p + ".function");
        ordered_json rendered;
        add_function(t, parse_function(tool["function"], p + ".function", rendered), p + ".function");
        t.tools.push_back({{"type", "function"}, {"function", std::move(rendered)}});
    }
}

// Legacy `functions`: the same definitions without the {"type": "function"} wrapper.
void parse_functions(const ordered_json& v, ToolsRequest& t) {
    if (!v.is_array()) throw wrong_type("functions", "an array", json(v));
    if (v.empty()) throw invalid_param("functions", "'functions' must not be empty");
    t.tools = ordered_json::array();
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "functions[" + std::to_string(i) + "]";
        ordered_json rendered;
        add_function(t, parse_function(v[i], p, rendered), p);
        t.tools.push_back({{"type", "function"}, {"function", std::move(rendered)}});
    }
    t.legacy = true;
    t.parallel = false;  // function_call answers hold one call
}

// tool_choice ("none" | "auto" | "required" | {"type": "function", "function": {"name"}}) or the
// legacy function_call ("none" | "auto" | {"name"}).
void parse_choice(const json& v, const std::string& param, ToolsRequest& t) {
    if (v.is_string()) {
        const std::string s = v.get<std::string>();
        if (s == "none") {
            t.choice = ToolChoice::kNone;
        } else if (s == "auto") {
            t.choice = ToolChoice::kAuto;
        } else if (s == "required" && !t.legacy) {
            t.choice = ToolChoice::kRequired;
        } else {
            throw invalid_param(param, "'" + param + "' must be " + (t.legacy ? "none, auto" : "none, auto, required") +
                                           " or an object naming a function, got '" + s + "'");
        }
        return;
    }
    if (!v.is_object()) throw wrong_type(param, "a string or an object", v);
    const json* fn = &v;
    if (!t.legacy) {
        for (const auto& [k, x] : v.items())
            if (k != "type" && k != "function") reject_unknown(param, k);
        if (required_string(v, "type", param) != "function")
            throw unsupported(param + ".type", "tool_choice type '" + v["type"].get<std::string>() + "'");
        if (!v.contains("function") || !v["function"].is_object())
            throw invalid_param(param + ".function", "'" + param + ".function' must be an object with a 'name'");
        fn = &v["function"];
    }
    const std::string path = t.legacy ? param : param + ".function";
    for (const auto& [k, x] : fn->items())
        if (k != "name") reject_unknown(path, k);
    t.forced = required_string(*fn, "name", path);
    if (!t.find(t.forced))
        throw invalid_param(param, "'" + param + "' names function '" + t.forced + "', which is not among the " +
                                       (t.legacy ? "functions" : "tools"));
    t.choice = ToolChoice::kNamed;
}

// Tool fields as they came in the body; checked together once all are read, since each
// depends on the others.
struct ToolFields {
    const ordered_json* tools = nullptr;
    const ordered_json* tool_choice = nullptr;
    const ordered_json* parallel = nullptr;
    const ordered_json* functions = nullptr;
    const ordered_json* function_call = nullptr;
};

ToolsRequest parse_tool_fields(const ToolFields& f) {
    ToolsRequest t;
    if (f.tools && f.functions) throw invalid_param("functions", "give 'tools' or the legacy 'functions', not both");
    if (f.tools) parse_tools(*f.tools, t);
    if (f.functions) parse_functions(*f.functions, t);
    if (!t.functions.empty()) t.choice = ToolChoice::kAuto;
    if (f.tool_choice) {
        if (!f.tools) throw invalid_param("tool_choice", "'tool_choice' is only allowed when 'tools' are specified");
        parse_choice(json(*f.tool_choice), "tool_choice", t);
    }
    if (f.function_call) {
        if (!f.functions)
            throw invalid_param("function_call", "'function_call' is only allowed when 'functions' are specified");
        parse_choice(json(*f.function_call), "function_call", t);
    }
    if (f.parallel) {
        if (!f.tools)
            throw invalid_param("parallel_tool_calls",
                                "'parallel_tool_calls' is only allowed when 'tools' are specified");
        t.parallel = boolean(json(*f.parallel), "parallel_tool_calls");
    }
    return t;
}

std::vector<int32_t> token_list(const json& v, const std::string& path) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < v.size(); ++i)
        ids.push_back(static_cast<int32_t>(integer_in(v[i], path + "[" + std::to_string(i) + "]", 0, INT32_MAX)));
    return ids;
}

std::vector<Prompt> parse_prompts(const json& v) {
    if (v.is_string()) {
        // An empty stop sequence would match at once and empty every output (as [""] would).
        if (v.get_ref<const std::string&>().empty()) throw invalid_param("stop", "'stop' must not be empty");
        return {v.get<std::string>()};
    }
    if (!v.is_array()) throw wrong_type("prompt", "a string, an array of strings, or an array of token ids", v);
    if (v.empty()) throw invalid_param("prompt", "'prompt' must not be empty");
    if (v[0].is_number()) return {token_list(v, "prompt")};
    std::vector<Prompt> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "prompt[" + std::to_string(i) + "]";
        if (v[i].is_string()) {
            out.emplace_back(v[i].get<std::string>());
        } else if (v[i].is_array()) {
            if (v[i].empty()) throw invalid_param(p, "'" + p + "' must not be empty");
            out.emplace_back(token_list(v[i], p));
        } else {
            throw wrong_type(p, "a string or an array of token ids", v[i]);
        }
    }
    return out;
}

}  // namespace

CompletionRequest parse_completion_request(const json& body) {
    require_object(body);
    CompletionRequest r;
    bool has_prompt = false;
    for (const auto& [key, v] : body.items()) {
        if (v.is_null()) continue;
        if (parse_common(key, v, r.gen, false)) continue;
        if (key == "prompt") {
            r.prompts = parse_prompts(v);
            has_prompt = true;
        } else if (key == "echo") {
            r.echo = boolean(v, key);
        } else if (key == "suffix") {
            if (!v.is_string()) throw wrong_type(key, "a string", v);
            r.suffix = v.get<std::string>();
        } else if (key == "logprobs") {
            r.gen.top_logprobs = integer_in(v, key, 0, 20);
            r.gen.logprobs = true;
        } else if (key == "best_of" && v.is_number_integer() && v.get<int64_t>() == 1) {
            continue;  // best_of 1 is plain sampling
        } else if (kUnsupportedCompletion.count(key)) {
            throw unsupported(key, "'" + key + "'");
        } else {
            throw invalid_param(key, "unknown field '" + key + "'");
        }
    }
    if (!has_prompt) throw ApiError(400, "'prompt' is required", "prompt", "missing_required_parameter");
    if (r.suffix && r.echo) throw invalid_param("suffix", "'suffix' cannot be combined with 'echo'");
    finish_common(body, r.gen);
    return r;
}

ChatRequest parse_chat_request(const ordered_json& ordered_body) {
    const json body = ordered_body;  // everything but the tool schemas is order-free
    require_object(body);
    ChatRequest r;
    bool has_messages = false;
    ToolFields tool_fields;
    for (const auto& [key, ov] : ordered_body.items()) {
        if (ov.is_null()) continue;
        if (key == "tools") {
            tool_fields.tools = &ov;
            continue;
        } else if (key == "tool_choice") {
            tool_fields.tool_choice = &ov;
            continue;
        } else if (key == "parallel_tool_calls") {
            tool_fields.parallel = &ov;
            continue;
        } else if (key == "functions") {
            tool_fields.functions = &ov;
            continue;
        } else if (key == "function_call") {
            tool_fields.function_call = &ov;
            continue;
        }
        const json& v = body[key];
        if (parse_common(key, v, r.gen, true)) continue;
        if (key == "messages") {
            r.messages = parse_messages(v);
            has_messages = true;
        } else if (key == "logprobs") {
            r.gen.logprobs = boolean(v, key);
        } else if (key == "top_logprobs") {
            r.gen.top_logprobs = integer_in(v, key, 0, 20);
        } else if (key == "response_format") {
            r.response_format = parse_response_format(ov);
        } else if (key == "reasoning_effort") {
            if (!v.is_string()) throw wrong_type(key, "a string", v);
            static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high"};
            if (!kEfforts.count(v.get<std::string>()))
                throw invalid_param(key, "'reasoning_effort' must be none, minimal, low, medium or high");
            r.reasoning_effort = v.get<std::string>();
        } else if (key == "chat_template_kwargs") {
            if (!ov.is_object()) throw wrong_type(key, "an object", v);
            for (const auto& [k, x] : ov.items()) {
                if (k == "messages" || k == "tools" || k == "add_generation_prompt")
                    throw invalid_param(key + "." + k, "'" + k + "' is set by the server, not by chat_template_kwargs");
                r.template_kwargs[k] = x;
            }
        } else if (key == "metadata") {
            if (!v.is_object()) throw wrong_type(key, "an object", v);
        } else if (kUnsupportedChat.count(key)) {
            if (key == "store" && v.is_boolean() && !v.get<bool>()) continue;  // not storing is what we do
            throw unsupported(key, "'" + key + "'");
        } else {
            throw invalid_param(key, "unknown field '" + key + "'");
        }
    }
    if (!has_messages) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
    finish_common(body, r.gen);
    r.tools = parse_tool_fields(tool_fields);
    return r;
}

const ToolFunction* ToolsRequest::find(const std::string& name) const {
    for (const ToolFunction& f : functions)
        if (f.name == name) return &f;
    return nullptr;
}

}  // namespace deskside::server
