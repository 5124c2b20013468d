#include "server/anthropic_messages.h"

#include <random>
#include <set>

#include "server/api_error.h"
#include "server/chat_relay.h"
#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Text blocks joined (cache_control is a hint for Anthropic's own cache: nothing to do here).
std::string text_blocks(const json& c, const std::string& path) {
    return joined_text(c, path, {"text"}, {"type", "text", "cache_control", "citations"}, "content block");
}

// One Messages turn -> chat messages: tool_result blocks become tool messages (before the user's
// text, as they answer the previous assistant turn), tool_use blocks the assistant's tool_calls.
void add_turn(const json& m, const std::string& p, json& out) {
    if (!m.is_object()) throw wrong_type(p, "an object");
    only_keys(m, {"role", "content"}, p);
    const std::string role = string_field(m, "role", p);
    if (role != "user" && role != "assistant")
        throw invalid_param(p + ".role", "'" + p + ".role' must be user or assistant");
    const json& content = required_field(m, "content", p);
    if (content.is_string()) {
        out.push_back({{"role", role}, {"content", content}});
        return;
    }
    if (!content.is_array()) throw wrong_type(p + ".content", "a string or an array of content blocks");
    std::string text;
    json calls = json::array();
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string bp = p + ".content[" + std::to_string(i) + "]";
        const json& b = content[i];
        if (!b.is_object()) throw wrong_type(bp, "an object");
        const std::string type = string_field(b, "type", bp);
        if (type == "text") {
            only_keys(b, {"type", "text", "cache_control", "citations"}, bp);
            text += string_field(b, "text", bp);
        } else if (type == "tool_use" && role == "assistant") {
            only_keys(b, {"type", "id", "name", "input", "cache_control"}, bp);
            const json& input = required_field(b, "input", bp);
            if (!input.is_object()) throw wrong_type(bp + ".input", "an object");
            calls.push_back({{"id", string_field(b, "id", bp)},
                             {"type", "function"},
                             {"function", {{"name", string_field(b, "name", bp)}, {"arguments", input.dump()}}}});
        } else if (type == "tool_result" && role == "user") {
            only_keys(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, bp);
            const std::string result = b.contains("content") ? text_blocks(b["content"], bp + ".content") : "";
            out.push_back(
                {{"role", "tool"}, {"tool_call_id", string_field(b, "tool_use_id", bp)}, {"content", result}});
        } else {
            throw unsupported(bp + ".type", "content block type '" + type + "' in a " + role + " message");
        }
    }
    if (!calls.empty()) {
        json msg = {
            {"role", "assistant"}, {"content", text.empty() ? json(nullptr) : json(text)}, {"tool_calls", calls}};
        out.push_back(std::move(msg));
    } else if (!text.empty() || out.empty() || out.back()["role"] != "tool") {
        out.push_back({{"role", role}, {"content", text}});
    }
}

json chat_tools(const json& tools) {
    if (!tools.is_array()) throw wrong_type("tools", "an array");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string p = "tools[" + std::to_string(i) + "]";
        const json& t = tools[i];
        if (!t.is_object()) throw wrong_type(p, "an object");
        if (t.contains("type") && t["type"] != "custom")
            throw unsupported(p + ".type", "server tool '" + t["type"].dump() + "'");
        only_keys(t, {"type", "name", "description", "input_schema", "cache_control", "strict"}, p);
        json f = {{"name", string_field(t, "name", p)}, {"parameters", required_field(t, "input_schema", p)}};
        if (t.contains("description") && !t["description"].is_null()) f["description"] = t["description"];
        if (t.contains("strict") && !t["strict"].is_null()) f["strict"] = t["strict"];
        out.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    return out;
}

// tool_choice {type: auto | any | tool | none} -> chat's auto | required | named | none.
void chat_tool_choice(const json& v, json& chat) {
    if (!v.is_object()) throw wrong_type("tool_choice", "an object");
    only_keys(v, {"type", "name", "disable_parallel_tool_use"}, "tool_choice");
    const std::string type = string_field(v, "type", "tool_choice");
    if (type == "auto")
        chat["tool_choice"] = "auto";
    else if (type == "any")
        chat["tool_choice"] = "required";
    else if (type == "none")
        chat["tool_choice"] = "none";
    else if (type == "tool")
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_field(v, "name", "tool_choice")}}}};
    else
        throw invalid_param("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
    if (v.contains("disable_parallel_tool_use") && v["disable_parallel_tool_use"].is_boolean())
        chat["parallel_tool_calls"] = !v["disable_parallel_tool_use"].get<bool>();
}

// output_config.format {type: json_schema, schema} -> chat's response_format (strict: the
// output must match, as Anthropic's structured outputs promise).
json chat_output_format(const json& v) {
    if (!v.is_object()) throw wrong_type("output_config", "an object");
    only_keys(v, {"format", "effort"}, "output_config");
    if (v.contains("effort") && !v["effort"].is_null()) throw unsupported("output_config.effort", "'output_config.effort'");
    if (!v.contains("format") || v["format"].is_null()) return nullptr;
    const json& f = v["format"];
    if (!f.is_object()) throw wrong_type("output_config.format", "an object");
    only_keys(f, {"type", "schema"}, "output_config.format");
    if (string_field(f, "type", "output_config.format") != "json_schema")
        throw invalid_param("output_config.format.type", "'output_config.format.type' must be json_schema");
    return {{"type", "json_schema"},
            {"json_schema", {{"name", "output"}, {"schema", required_field(f, "schema", "output_config.format")}, {"strict", true}}}};
}

// A chat field an error names -> the Messages field the client sent.
std::string messages_param(const std::string& p) {
    if (p == "stop" || p.rfind("stop[", 0) == 0) return "stop_sequences" + p.substr(4);
    if (p.rfind("response_format", 0) == 0) return "output_config.format";
    return p;
}

// Anthropic's error types for our ApiError types.
std::string anthropic_type(const ApiError& e) {
    if (e.status() == 401) return "authentication_error";
    if (e.status() == 403) return "permission_error";
    if (e.status() == 404) return "not_found_error";
    if (e.status() == 413) return "request_too_large";
    if (e.status() == 429) return "rate_limit_error";
    if (e.status() == 503 || e.type() == "overloaded_error") return "overloaded_error";
    if (e.status() >= 500) return "api_error";
    return "invalid_request_error";
}

ordered_json error_body(const std::string& type, const std::string& message) {
    return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

void send_anthropic_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status();
    std::string message = e.what();
    if (!e.param().empty()) message = messages_param(e.param()) + ": " + message;
    res.set_content(dump(error_body(anthropic_type(e), message)), "application/json");
}

// A forced call (tool_choice any / tool) ends with OpenAI's finish_reason "stop", yet it is a
// tool_use turn for Anthropic's clients, which run the tools when they see it.
std::string stop_reason(const std::string& finish, const json& stop_sequence, bool has_calls) {
    if (finish == "length") return "max_tokens";
    if (finish == "tool_calls" || has_calls) return "tool_use";
    if (stop_sequence.is_string()) return "stop_sequence";
    return "end_turn";
}

// The matched stop sequence where the chat answer says which one (vLLM's `stop_reason`
// extension of a choice); null otherwise.
json matched_stop(const json& choice) {
    const auto it = choice.find("stop_reason");
    return it != choice.end() && it->is_string() ? *it : json(nullptr);
}

ordered_json usage_of(const json& u) {
    int64_t cached = 0;
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
        cached = u["prompt_tokens_details"].value("cached_tokens", 0);
    return {{"input_tokens", u.value("prompt_tokens", 0)},
            {"output_tokens", u.value("completion_tokens", 0)},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", cached}};
}

// A tool call's arguments as the object Anthropic's `input` is (a model's malformed JSON stays
// visible as a string under "arguments" rather than being dropped).
json tool_input(const std::string& arguments) {
    const json parsed = json::parse(arguments, nullptr, false);
    return parsed.is_object() ? parsed : json{{"arguments", arguments}};
}

// The streamed chat chunks as Anthropic's events: a content block per text run or tool call.
class MessagesStream : public ChatStreamTranslator {
   public:
    explicit MessagesStream(std::string model) : model_(std::move(model)) {}

    std::string start() override {
        const ordered_json message = {{"id", random_id("msg_")},
                                      {"type", "message"},
                                      {"role", "assistant"},
                                      {"model", model_},
                                      {"content", ordered_json::array()},
                                      {"stop_reason", nullptr},
                                      {"stop_sequence", nullptr},
                                      {"usage", {{"input_tokens", 0}, {"output_tokens", 0}}}};
        return sse_event("message_start", {{"type", "message_start"}, {"message", message}});
    }

    std::string chunk(const json& c) override {
        std::string out;
        if (c.contains("usage") && c["usage"].is_object()) usage_ = usage_of(c["usage"]);
        if (!c.contains("choices") || c["choices"].empty()) return out;
        const json& choice = c["choices"][0];
        const json delta = choice.value("delta", json::object());
        if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
            if (open_ != Open::Text) {
                out += close();
                open_ = Open::Text;
                out += sse_event("content_block_start", {{"type", "content_block_start"},
                                                         {"index", index_},
                                                         {"content_block", {{"type", "text"}, {"text", ""}}}});
            }
            out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                                     {"index", index_},
                                                     {"delta", {{"type", "text_delta"}, {"text", delta["content"]}}}});
        }
        if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
            for (const json& tc : delta["tool_calls"]) {
                const int64_t call = tc.value("index", 0);
                if (open_ != Open::Tool || call != call_index_) {
                    out += close();
                    open_ = Open::Tool;
                    had_calls_ = true;
                    call_index_ = call;
                    const std::string name = tc.contains("function") ? tc["function"].value("name", "") : "";
                    out += sse_event("content_block_start", {{"type", "content_block_start"},
                                                             {"index", index_},
                                                             {"content_block",
                                                              {{"type", "tool_use"},
                                                               {"id", tc.value("id", random_id("toolu_"))},
                                                               {"name", name},
                                                               {"input", ordered_json::object()}}}});
                }
                const std::string args = tc.contains("function") ? tc["function"].value("arguments", "") : "";
                if (!args.empty())
                    out += sse_event("content_block_delta",
                                     {{"type", "content_block_delta"},
                                      {"index", index_},
                                      {"delta", {{"type", "input_json_delta"}, {"partial_json", args}}}});
            }
        }
        if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
            finish_ = choice["finish_reason"];
            stop_sequence_ = matched_stop(choice);
        }
        return out;
    }

    std::string error(const json& e) override {
        const json& err = e["error"];
        return sse_event("error",
                         error_body(err.value("type", "") == "overloaded_error" ? "overloaded_error" : "api_error",
                                    err.value("message", "")));
    }

    std::string end() override {
        std::string out = close();
        ordered_json usage = {{"output_tokens", 0}};
        if (usage_.is_object()) usage = usage_;
        out += sse_event(
            "message_delta",
            {{"type", "message_delta"},
             {"delta",
              {{"stop_reason", stop_reason(finish_, stop_sequence_, had_calls_)}, {"stop_sequence", stop_sequence_}}},
             {"usage", usage}});
        return out + sse_event("message_stop", {{"type", "message_stop"}});
    }

   private:
    enum class Open { None, Text, Tool };

    std::string close() {
        if (open_ == Open::None) return {};
        open_ = Open::None;
        return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
    }

    std::string model_;
    Open open_ = Open::None;
    int64_t index_ = 0, call_index_ = -1;
    bool had_calls_ = false;
    std::string finish_;
    json stop_sequence_;
    ordered_json usage_;
};

}  // namespace

json messages_to_chat(const json& body, bool count) {
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_type");
    json chat = json::object();
    json messages = json::array();
    bool has_messages = false, has_max = false;
    for (const auto& [key, v] : body.items()) {
        if (v.is_null()) continue;
        if (key == "model") {
            chat[key] = v;
        } else if (key == "system") {
            messages.insert(messages.begin(), json{{"role", "system"}, {"content", text_blocks(v, "system")}});
        } else if (key == "messages") {
            if (!v.is_array()) throw wrong_type(key, "an array");
            if (v.empty()) throw invalid_param(key, "'messages' must not be empty");
            json turns = json::array();
            for (size_t i = 0; i < v.size(); ++i) add_turn(v[i], "messages[" + std::to_string(i) + "]", turns);
            for (auto& t : turns) messages.push_back(std::move(t));
            has_messages = true;
        } else if (key == "tools") {
            chat["tools"] = chat_tools(v);
        } else if (key == "tool_choice") {
            chat_tool_choice(v, chat);
        } else if (key == "cache_control") {
            if (!v.is_object()) throw wrong_type(key, "an object");  // a hint for Anthropic's own prompt cache
        } else if (key == "output_config") {
            if (json f = chat_output_format(v); !f.is_null()) chat["response_format"] = std::move(f);
        } else if (key == "thinking") {
            if (!v.is_object() || v.value("type", "") != "disabled") throw unsupported(key, "extended thinking");
        } else if (count) {
            throw invalid_param(key, "unknown field '" + key + "'");
        } else if (key == "max_tokens") {
            chat["max_tokens"] = v;
            has_max = true;
        } else if (key == "temperature") {
            if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
                throw invalid_param(key, "'temperature' must be a number between 0 and 1");
            chat[key] = v;
        } else if (key == "top_p" || key == "top_k") {
            chat[key] = v;
        } else if (key == "stop_sequences") {
            chat["stop"] = v;
        } else if (key == "stream") {
            if (!v.is_boolean()) throw wrong_type(key, "a boolean");
            chat["stream"] = v;
            if (v.get<bool>()) chat["stream_options"] = {{"include_usage", true}};
        } else if (key == "metadata") {
            if (!v.is_object()) throw wrong_type(key, "an object");
            only_keys(v, {"user_id"}, "metadata");
        } else if (key == "service_tier") {
            if (v != "auto" && v != "standard_only")
                throw invalid_param(key, "'service_tier' must be auto or standard_only");
        } else if (key == "container" || key == "mcp_servers" || key == "context_management") {
            throw unsupported(key, "'" + key + "'");
        } else {
            throw invalid_param(key, "unknown field '" + key + "'");
        }
    }
    if (!has_messages) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
    if (!count && !has_max) throw ApiError(400, "'max_tokens' is required", "max_tokens", "missing_required_parameter");
    if (count) chat["max_tokens"] = 1;
    chat["messages"] = std::move(messages);
    return chat;
}

void handle_messages(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model) {
    try {
        const json chat = messages_to_chat(parse_body(req), false);
        if (chat.value("stream", false)) {
            relay_chat_stream(req, chat, model, res, std::make_shared<MessagesStream>(model->id));
            return;
        }
        const json answer = run_chat(req, chat, model);
        const json& choice = answer["choices"][0];
        const json& message = choice["message"];
        ordered_json content = ordered_json::array();
        const json text = message.value("content", json(nullptr));
        const bool has_calls =
            message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty();
        if (text.is_string() && (!text.get<std::string>().empty() || !has_calls))
            content.push_back({{"type", "text"}, {"text", text}});
        if (has_calls)
            for (const json& tc : message["tool_calls"])
                content.push_back({{"type", "tool_use"},
                                   {"id", tc.value("id", random_id("toolu_"))},
                                   {"name", tc["function"].value("name", "")},
                                   {"input", tool_input(tc["function"].value("arguments", "{}"))}});
        const json stop = matched_stop(choice);
        const ordered_json body = {
            {"id", random_id("msg_")}, {"type", "message"},
            {"role", "assistant"},     {"model", model->id},
            {"content", content},      {"stop_reason", stop_reason(choice.value("finish_reason", ""), stop, has_calls)},
            {"stop_sequence", stop},   {"usage", usage_of(answer["usage"])}};
        res.set_content(dump(body), "application/json");
    } catch (const ApiError& e) {
        send_anthropic_error(res, e);
    }
}

// The prompt's length is what the chat route reports as prompt_tokens: the same rendering and
// tokenizing as the request that usually follows (whose prefix then finds this one's KV cached).
void handle_count_tokens(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model) {
    try {
        const json answer = run_chat(req, messages_to_chat(parse_body(req), true), model);
        res.set_content(dump({{"input_tokens", answer["usage"].value("prompt_tokens", 0)}}), "application/json");
    } catch (const ApiError& e) {
        send_anthropic_error(res, e);
    }
}

}  // namespace deskside::server
