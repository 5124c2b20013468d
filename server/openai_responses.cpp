#include "server/openai_responses.h"

#include <chrono>
#include <random>
#include <set>

#include "server/api_error.h"
#include "server/chat_relay.h"
#include "server/openai_handlers.h"

namespace deskside::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Message content: a string, or input_text / output_text parts (joined, as chat parts are).
std::string content_text(const json& c, const std::string& path) {
    return joined_text(c, path, {"input_text", "output_text"}, {"type", "text", "annotations", "logprobs"},
                       "content part");
}

// input items -> chat messages. Consecutive function_call items are one assistant turn with
// several tool calls (parallel calls), as chat histories carry them.
json input_messages(const json& input) {
    json messages = json::array();
    if (input.is_string()) {
        messages.push_back({{"role", "user"}, {"content", input}});
        return messages;
    }
    if (!input.is_array()) throw wrong_type("input", "a string or an array of input items");
    if (input.empty()) throw invalid_param("input", "'input' must not be empty");
    for (size_t i = 0; i < input.size(); ++i) {
        const std::string p = "input[" + std::to_string(i) + "]";
        const json& item = input[i];
        if (!item.is_object()) throw wrong_type(p, "an object");
        const std::string type = item.contains("type") ? string_field(item, "type", p) : "message";
        if (type == "message") {
            only_keys(item, {"type", "role", "content", "id", "status", "phase"}, p);
            const std::string role = string_field(item, "role", p);
            if (role != "user" && role != "assistant" && role != "system" && role != "developer")
                throw invalid_param(p + ".role", "'" + p + ".role' must be user, assistant, system or developer");
            messages.push_back({{"role", role}, {"content", content_text(required_field(item, "content", p), p + ".content")}});
        } else if (type == "function_call") {
            only_keys(item, {"type", "call_id", "name", "arguments", "id", "status"}, p);
            const json call = {
                {"id", string_field(item, "call_id", p)},
                {"type", "function"},
                {"function",
                 {{"name", string_field(item, "name", p)}, {"arguments", string_field(item, "arguments", p)}}}};
            if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls"))
                messages.back()["tool_calls"].push_back(call);
            else
                messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
        } else if (type == "function_call_output") {
            only_keys(item, {"type", "call_id", "output", "id", "status"}, p);
            messages.push_back({{"role", "tool"},
                                {"tool_call_id", string_field(item, "call_id", p)},
                                {"content", content_text(required_field(item, "output", p), p + ".output")}});
        } else {
            throw unsupported(p + ".type", "input item type '" + type + "'");
        }
    }
    return messages;
}

// Flat Responses function tools -> chat's nested {"type", "function": {...}}.
json chat_tools(const json& tools) {
    if (!tools.is_array()) throw wrong_type("tools", "an array");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const std::string p = "tools[" + std::to_string(i) + "]";
        const json& t = tools[i];
        if (!t.is_object()) throw wrong_type(p, "an object");
        const std::string type = string_field(t, "type", p);
        if (type != "function") throw unsupported(p + ".type", "tool type '" + type + "'");
        only_keys(t, {"type", "name", "description", "parameters", "strict"}, p);
        json f = {{"name", string_field(t, "name", p)}};
        for (const char* k : {"description", "parameters", "strict"})
            if (t.contains(k) && !t[k].is_null()) f[k] = t[k];
        out.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    return out;
}

json chat_tool_choice(const json& v) {
    if (v.is_string()) return v;
    if (!v.is_object()) throw wrong_type("tool_choice", "a string or an object");
    const std::string type = string_field(v, "type", "tool_choice");
    if (type != "function") throw unsupported("tool_choice.type", "tool_choice type '" + type + "'");
    only_keys(v, {"type", "name"}, "tool_choice");
    return {{"type", "function"}, {"function", {{"name", string_field(v, "name", "tool_choice")}}}};
}

// text.format -> response_format.
json chat_response_format(const json& text) {
    if (!text.is_object()) throw wrong_type("text", "an object");
    only_keys(text, {"format", "verbosity"}, "text");
    if (text.contains("verbosity") && !text["verbosity"].is_null())
        throw unsupported("text.verbosity", "'text.verbosity'");
    if (!text.contains("format") || text["format"].is_null()) return nullptr;
    const json& f = text["format"];
    if (!f.is_object()) throw wrong_type("text.format", "an object");
    const std::string type = string_field(f, "type", "text.format");
    if (type == "text" || type == "json_object") {
        only_keys(f, {"type"}, "text.format");
        return {{"type", type}};
    }
    if (type != "json_schema")
        throw invalid_param("text.format.type", "'text.format.type' must be text, json_object or json_schema");
    only_keys(f, {"type", "name", "schema", "strict", "description"}, "text.format");
    json schema = {{"name", string_field(f, "name", "text.format")}, {"schema", required_field(f, "schema", "text.format")}};
    for (const char* k : {"strict", "description"})
        if (f.contains(k) && !f[k].is_null()) schema[k] = f[k];
    return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

// A chat field an error names -> the Responses field the client sent. A message's index differs
// from its input item's (instructions come first, function calls merge), so "messages[i]..."
// becomes plain "input".
std::string responses_param(const std::string& chat_param) {
    if (chat_param.rfind("messages", 0) == 0) return "input";
    if (chat_param == "max_completion_tokens") return "max_output_tokens";
    if (chat_param.rfind("response_format", 0) == 0) return "text.format" + chat_param.substr(15);
    return chat_param;
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// The Response object around `output`; `status` completed, incomplete or in_progress.
struct ResponseShell {
    std::string id = random_id("resp_");
    int64_t created = unix_now();
    json request;  // the Responses body, for the fields a Response echoes
    std::string model;

    ordered_json make(const std::string& status, ordered_json output, const ordered_json& usage) const {
        const auto get = [&](const char* k, json fallback) {
            return request.contains(k) && !request[k].is_null() ? request[k] : fallback;
        };
        ordered_json r = {
            {"id", id}, {"object", "response"}, {"created_at", created}, {"status", status}, {"error", nullptr}};
        r["incomplete_details"] =
            status == "incomplete" ? ordered_json{{"reason", "max_output_tokens"}} : ordered_json(nullptr);
        r["instructions"] = get("instructions", nullptr);
        r["max_output_tokens"] = get("max_output_tokens", nullptr);
        r["model"] = model;
        r["output"] = std::move(output);
        r["parallel_tool_calls"] = get("parallel_tool_calls", true);
        r["previous_response_id"] = nullptr;
        r["store"] = false;
        r["temperature"] = get("temperature", 1.0);
        r["text"] = get("text", json{{"format", {{"type", "text"}}}});
        r["tool_choice"] = get("tool_choice", "auto");
        r["tools"] = get("tools", json::array());
        r["top_p"] = get("top_p", 1.0);
        r["truncation"] = "disabled";
        r["usage"] = usage;
        r["user"] = get("user", nullptr);
        r["metadata"] = get("metadata", json::object());
        return r;
    }
};

ordered_json usage_of(const json& chat_usage) {
    if (!chat_usage.is_object()) return nullptr;
    const int64_t in = chat_usage.value("prompt_tokens", 0), out = chat_usage.value("completion_tokens", 0);
    int64_t cached = 0;
    if (chat_usage.contains("prompt_tokens_details"))
        cached = chat_usage["prompt_tokens_details"].value("cached_tokens", 0);
    return {{"input_tokens", in},
            {"input_tokens_details", {{"cached_tokens", cached}}},
            {"output_tokens", out},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", in + out}};
}

ordered_json message_item(const std::string& id, const std::string& text, const std::string& status) {
    return {{"id", id},
            {"type", "message"},
            {"status", status},
            {"role", "assistant"},
            {"content", ordered_json::array({{{"type", "output_text"},
                                              {"text", text},
                                              {"annotations", ordered_json::array()},
                                              {"logprobs", ordered_json::array()}}})}};
}

ordered_json function_item(const std::string& id, const std::string& call_id, const std::string& name,
                           const std::string& arguments, const std::string& status) {
    return {{"id", id},           {"type", "function_call"},
            {"status", status},   {"arguments", arguments},
            {"call_id", call_id}, {"name", name}};
}

// The streamed chat chunks as Responses events: an output item per text run or tool call,
// opened at its first fragment and closed before the next one (or at the end).
class ResponsesStream : public ChatStreamTranslator {
   public:
    explicit ResponsesStream(ResponseShell shell) : shell_(std::move(shell)) {}

    std::string start() override {
        const ordered_json r = shell_.make("in_progress", ordered_json::array(), nullptr);
        // One statement per event: each takes the next sequence number, in the order sent.
        std::string out = event("response.created", {{"response", r}});
        return out + event("response.in_progress", {{"response", r}});
    }

    std::string chunk(const json& c) override {
        std::string out;
        if (c.contains("usage") && c["usage"].is_object()) usage_ = usage_of(c["usage"]);
        if (!c.contains("choices") || c["choices"].empty()) return out;
        const json& choice = c["choices"][0];
        const json delta = choice.value("delta", json::object());
        if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
            if (open_ != Open::Message) {
                out += close();
                out += open_message();
            }
            const std::string d = delta["content"];
            text_ += d;
            out += event("response.output_text.delta", {{"item_id", item_id_},
                                                        {"output_index", output_.size()},
                                                        {"content_index", 0},
                                                        {"delta", d},
                                                        {"logprobs", ordered_json::array()}});
        }
        if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
            for (const json& tc : delta["tool_calls"]) {
                const int64_t index = tc.value("index", 0);
                if (open_ != Open::Function || index != call_index_) {
                    out += close();
                    call_index_ = index;
                    call_id_ = tc.value("id", random_id("call_"));
                    name_ = tc.contains("function") ? tc["function"].value("name", "") : "";
                    open_ = Open::Function;
                    item_id_ = random_id("fc_");
                    text_.clear();
                    out += event("response.output_item.added",
                                 {{"output_index", output_.size()},
                                  {"item", function_item(item_id_, call_id_, name_, "", "in_progress")}});
                }
                const std::string args = tc.contains("function") ? tc["function"].value("arguments", "") : "";
                if (args.empty()) continue;
                text_ += args;
                out += event("response.function_call_arguments.delta",
                             {{"item_id", item_id_}, {"output_index", output_.size()}, {"delta", args}});
            }
        }
        if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) finish_ = choice["finish_reason"];
        return out;
    }

    std::string error(const json& e) override {
        const json& err = e["error"];
        return event("error", {{"code", err.value("code", json(nullptr))},
                               {"message", err.value("message", "")},
                               {"param", err.value("param", json(nullptr))}});
    }

    std::string end() override {
        std::string out;
        if (open_ == Open::None && output_.empty()) out += open_message();
        out += close();
        const std::string status = finish_ == "length" ? "incomplete" : "completed";
        return out + event("response.completed", {{"response", shell_.make(status, output_, usage_)}});
    }

   private:
    enum class Open { None, Message, Function };

    std::string event(const std::string& type, ordered_json data) {
        ordered_json e = {{"type", type}, {"sequence_number", sequence_++}};
        for (auto& [k, v] : data.items()) e[k] = v;
        return sse_event(type, e);
    }

    std::string open_message() {
        open_ = Open::Message;
        item_id_ = random_id("msg_");
        text_.clear();
        const ordered_json part = {{"type", "output_text"},
                                   {"text", ""},
                                   {"annotations", ordered_json::array()},
                                   {"logprobs", ordered_json::array()}};
        std::string out = event("response.output_item.added", {{"output_index", output_.size()},
                                                    {"item",
                                                     {{"id", item_id_},
                                                      {"type", "message"},
                                                      {"status", "in_progress"},
                                                      {"role", "assistant"},
                                                      {"content", ordered_json::array()}}}});
        return out + event("response.content_part.added", {{"item_id", item_id_},
                                                           {"output_index", output_.size()},
                                                           {"content_index", 0},
                                                           {"part", part}});
    }

    std::string close() {
        std::string out;
        const size_t index = output_.size();
        if (open_ == Open::Message) {
            const ordered_json item = message_item(item_id_, text_, finish_ == "length" ? "incomplete" : "completed");
            out += event("response.output_text.done", {{"item_id", item_id_},
                                                       {"output_index", index},
                                                       {"content_index", 0},
                                                       {"text", text_},
                                                       {"logprobs", ordered_json::array()}});
            out += event(
                "response.content_part.done",
                {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", item["content"][0]}});
            out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
            output_.push_back(item);
        } else if (open_ == Open::Function) {
            const ordered_json item = function_item(item_id_, call_id_, name_, text_, "completed");
            out += event("response.function_call_arguments.done",
                         {{"item_id", item_id_}, {"output_index", index}, {"arguments", text_}});
            out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
            output_.push_back(item);
        }
        open_ = Open::None;
        return out;
    }

    ResponseShell shell_;
    int64_t sequence_ = 0;
    Open open_ = Open::None;
    std::string item_id_, text_, call_id_, name_;
    int64_t call_index_ = -1;
    ordered_json output_ = ordered_json::array();
    ordered_json usage_ = nullptr;
    std::string finish_;
};

}  // namespace

json responses_to_chat(const json& body) {
    if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_type");
    json chat = json::object();
    json messages = json::array();
    json input;
    for (const auto& [key, v] : body.items()) {
        if (v.is_null()) continue;
        if (key == "model" || key == "temperature" || key == "top_p" || key == "parallel_tool_calls" || key == "user" ||
            key == "metadata") {
            chat[key] = v;
        } else if (key == "input") {
            input = v;
        } else if (key == "instructions") {
            if (!v.is_string()) throw wrong_type(key, "a string");
            messages.push_back({{"role", "system"}, {"content", v}});
        } else if (key == "max_output_tokens") {
            chat["max_completion_tokens"] = v;
        } else if (key == "tools") {
            chat["tools"] = chat_tools(v);
        } else if (key == "tool_choice") {
            chat["tool_choice"] = chat_tool_choice(v);
        } else if (key == "text") {
            if (json f = chat_response_format(v); !f.is_null()) chat["response_format"] = std::move(f);
        } else if (key == "stream") {
            if (!v.is_boolean()) throw wrong_type(key, "a boolean");
            chat["stream"] = v;
            if (v.get<bool>()) chat["stream_options"] = {{"include_usage", true}};
        } else if (key == "store") {
            if (!v.is_boolean()) throw wrong_type(key, "a boolean");
            if (v.get<bool>())
                throw ApiError(400, "this server is stateless: it cannot store responses; send 'store': false", key,
                               "unsupported_parameter");
        } else if (key == "previous_response_id" || key == "conversation") {
            throw ApiError(400,
                           "this server is stateless: '" + key +
                               "' needs stored responses; send the whole "
                               "conversation as 'input' instead",
                           key, "unsupported_parameter");
        } else if (key == "truncation") {
            if (v != "disabled") throw unsupported(key, "'truncation' other than 'disabled'");
        } else if (key == "safety_identifier" || key == "prompt_cache_key") {
            if (!v.is_string()) throw wrong_type(key, "a string");  // identifies the caller; changes nothing here
        } else if (key == "include") {
            if (!v.is_array() || !v.empty()) throw unsupported(key, "'include'");
        } else if (key == "background" || key == "reasoning" || key == "service_tier" || key == "top_logprobs" ||
                   key == "max_tool_calls" || key == "prompt" || key == "stream_options" ||
                   key == "prompt_cache_retention") {
            throw unsupported(key, "'" + key + "'");
        } else {
            throw invalid_param(key, "unknown field '" + key + "'");
        }
    }
    if (input.is_null()) throw ApiError(400, "'input' is required", "input", "missing_required_parameter");
    for (auto& m : input_messages(input)) messages.push_back(std::move(m));
    chat["messages"] = std::move(messages);
    return chat;
}

void handle_responses(const httplib::Request& req, httplib::Response& res, std::shared_ptr<ServedModel> model) {
    const json body = parse_body(req);
    const json chat = responses_to_chat(body);
    ResponseShell shell;
    shell.request = body;
    shell.model = model->id;
    try {
        if (chat.value("stream", false)) {
            relay_chat_stream(req, chat, model, res, std::make_shared<ResponsesStream>(std::move(shell)));
            return;
        }
        const json answer = run_chat(req, chat, model);
        const json& choice = answer["choices"][0];
        const json& message = choice["message"];
        const bool incomplete = choice["finish_reason"] == "length";
        ordered_json output = ordered_json::array();
        const std::string text =
            message.contains("content") && message["content"].is_string() ? message["content"] : "";
        const bool has_calls =
            message.contains("tool_calls") && message["tool_calls"].is_array() && !message["tool_calls"].empty();
        if (!text.empty() || !has_calls)
            output.push_back(message_item(random_id("msg_"), text, incomplete ? "incomplete" : "completed"));
        if (has_calls)
            for (const json& tc : message["tool_calls"])
                output.push_back(function_item(random_id("fc_"), tc.value("id", random_id("call_")),
                                               tc["function"].value("name", ""), tc["function"].value("arguments", ""),
                                               "completed"));
        res.set_content(dump(shell.make(incomplete ? "incomplete" : "completed", output, usage_of(answer["usage"]))),
                        "application/json");
    } catch (const ApiError& e) {
        if (e.param().empty()) throw;
        throw ApiError(e.status(), e.what(), responses_param(e.param()), e.code(), e.type());
    }
}

}  // namespace deskside::server
