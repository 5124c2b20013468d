#include "server/openai_request.h"

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

ApiError unsupported(const std::string& param, const std::string& what) {
    return ApiError(400, what + " ('" + param + "') is not supported by this server", param, "unsupported_parameter");
}

std::vector<std::string> parse_stop(const json& v) {
    if (v.is_string()) return {v.get<std::string>()};
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
    } else if (key == "user") {
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
    "tools", "tool_choice", "parallel_tool_calls", "functions", "function_call", "audio", "modalities",
    "prediction", "reasoning_effort", "web_search_options", "service_tier", "store", "verbosity"};
const std::set<std::string> kUnsupportedCompletion = {"suffix", "best_of"};

void require_object(const json& body) {
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object, got " + type_name(body), "", "invalid_type");
}

std::string message_content(const json& content, const std::string& path) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw wrong_type(path, "a string or an array of content parts", content);
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string p = path + "[" + std::to_string(i) + "]";
        const json& part = content[i];
        if (!part.is_object()) throw wrong_type(p, "an object", part);
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string()) throw invalid_param(p + ".type", "'" + p + ".type' is required");
        if (*type != "text")
            throw unsupported(p + ".type", "content part type '" + type->get<std::string>() + "'");
        for (const auto& [k, x] : part.items())
            if (k != "type" && k != "text") throw invalid_param(p + "." + k, "unknown field '" + p + "." + k + "'");
        const auto t = part.find("text");
        if (t == part.end() || !t->is_string()) throw invalid_param(p + ".text", "'" + p + ".text' must be a string");
        text += t->get<std::string>();
    }
    return text;
}

nlohmann::ordered_json parse_messages(const json& v) {
    if (!v.is_array()) throw wrong_type("messages", "an array", v);
    if (v.empty()) throw invalid_param("messages", "'messages' must not be empty");
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = "messages[" + std::to_string(i) + "]";
        const json& m = v[i];
        if (!m.is_object()) throw wrong_type(p, "an object", m);
        const auto role = m.find("role");
        if (role == m.end() || !role->is_string()) throw invalid_param(p + ".role", "'" + p + ".role' must be a string");
        std::string r = role->get<std::string>();
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
            throw invalid_param(p + ".role", "'" + p + ".role' must be system, developer, user, assistant or tool, got '" + r + "'");
        nlohmann::ordered_json msg;
        msg["role"] = r == "developer" ? "system" : r;
        std::string content;
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
            } else if (k == "tool_calls" || k == "function_call" || k == "audio") {
                if (!x.is_null()) throw unsupported(fp, "'" + k + "' in messages");
            } else if (k == "refusal" && r == "assistant") {
                if (!x.is_null() && !x.is_string()) throw wrong_type(fp, "a string", x);
            } else {
                throw invalid_param(fp, "unknown field '" + fp + "'");
            }
        }
        if (!m.contains("content") && r != "assistant") throw invalid_param(p + ".content", "'" + p + ".content' is required");
        msg["content"] = content;
        out.push_back(std::move(msg));
    }
    return out;
}

std::vector<int32_t> token_list(const json& v, const std::string& path) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < v.size(); ++i)
        ids.push_back(static_cast<int32_t>(integer_in(v[i], path + "[" + std::to_string(i) + "]", 0, INT32_MAX)));
    return ids;
}

std::vector<Prompt> parse_prompts(const json& v) {
    if (v.is_string()) return {v.get<std::string>()};
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
    finish_common(body, r.gen);
    return r;
}

ChatRequest parse_chat_request(const json& body) {
    require_object(body);
    ChatRequest r;
    bool has_messages = false;
    for (const auto& [key, v] : body.items()) {
        if (v.is_null()) continue;
        if (parse_common(key, v, r.gen, true)) continue;
        if (key == "messages") {
            r.messages = parse_messages(v);
            has_messages = true;
        } else if (key == "logprobs") {
            r.gen.logprobs = boolean(v, key);
        } else if (key == "top_logprobs") {
            r.gen.top_logprobs = integer_in(v, key, 0, 20);
        } else if (key == "response_format") {
            if (!v.is_object()) throw wrong_type(key, "an object", v);
            const auto t = v.find("type");
            if (t == v.end() || !t->is_string()) throw invalid_param("response_format.type", "'response_format.type' is required");
            if (*t != "text") throw unsupported("response_format", "response_format type '" + t->get<std::string>() + "'");
            for (const auto& [k, x] : v.items())
                if (k != "type") throw invalid_param("response_format." + k, "unknown field 'response_format." + k + "'");
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
    return r;
}

}  // namespace deskside::server
