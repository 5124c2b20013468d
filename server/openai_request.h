// Parsing and validation of OpenAI request bodies (/v1/completions, /v1/chat/completions).
//
// Fail closed (DESIGN.md key decision 6): every top-level field is either honoured, accepted
// because it changes nothing for us (user, metadata, response_format text), or rejected with a
// 400 naming it. Unknown fields, wrong types and out-of-range values are 400s with `param` set
// to the field's JSON path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace deskside::server {

// What both endpoints share: how many tokens, how to sample them, how to return them.
struct GenerationRequest {
    std::string model;
    std::optional<int64_t> max_tokens;  // absent: endpoint default
    double temperature = 1.0;
    double top_p = 1.0;
    int64_t n = 1;
    std::vector<std::string> stop;
    std::optional<uint64_t> seed;
    double presence_penalty = 0.0;
    double frequency_penalty = 0.0;
    // The sampler extras vLLM and llama.cpp accept (engine/sampler.h): off by default.
    int64_t top_k = 0;
    double min_p = 0.0;
    double typical_p = 1.0;
    double repetition_penalty = 1.0;
    std::vector<std::pair<int32_t, float>> logit_bias;
    bool logprobs = false;
    int64_t top_logprobs = 0;  // alternatives per position
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool ignore_eos = false;     // vLLM's and llama.cpp's extension: end-of-generation tokens are banned
};

// A prompt given as text or as token ids.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest {
    GenerationRequest gen;
    std::vector<Prompt> prompts;  // one choice group per prompt
    bool echo = false;
    std::optional<std::string> suffix;  // fill-in-the-middle: the text after the completion
};

// A function the model may call (from `tools`, or the legacy `functions`).
struct ToolFunction {
    std::string name;
    nlohmann::ordered_json parameters;  // JSON Schema of the arguments object; null when not given
    bool strict = false;
};

enum class ToolChoice {
    kNone,      // the model must not call: tools are still rendered (they explain earlier calls), no parsing
    kAuto,      // the model decides; calls are parsed out of its text
    kRequired,  // at least one call, enforced by a grammar
    kNamed,     // exactly one call of `forced`, enforced by a grammar
};

// What a chat request says about tool calling. Without tools, choice is kNone.
struct ToolsRequest {
    std::vector<ToolFunction> functions;
    // The template's `tools` variable: [{"type": "function", "function": {...}}] with each function
    // as the client sent it (key order kept, since templates dump schemas with tojson); null when none.
    nlohmann::ordered_json tools = nullptr;
    ToolChoice choice = ToolChoice::kNone;
    std::string forced;     // kNamed: the function's name
    bool parallel = true;   // parallel_tool_calls: more than one call per answer
    bool legacy = false;    // the request used functions/function_call: answer with message.function_call
    // ```json fenced blocks count as calls; not where strict tools are enforced with tool_choice
    // auto, since only the format's marker starts the grammar there (a fenced call would escape it).
    bool fenced_calls = true;
    bool parse_calls() const { return choice != ToolChoice::kNone; }
    const ToolFunction* find(const std::string& name) const;
};

// response_format: free text, any JSON object, or JSON matching a schema (by constrained
// sampling: engine/json_schema.h; a schema keyword that cannot be enforced is a 400).
struct ResponseFormat {
    enum class Kind { kText, kJsonObject, kJsonSchema };
    Kind kind = Kind::kText;
    std::string name;               // json_schema.name
    nlohmann::ordered_json schema;  // json_schema.schema (null: any JSON value)
    bool strict = false;
};

struct ChatRequest {
    GenerationRequest gen;
    ResponseFormat response_format;
    // reasoning_effort, for templates that read it (gpt-oss's); others give a 400.
    std::optional<std::string> reasoning_effort;
    // chat_template_kwargs (vLLM's and llama.cpp's extension): extra template variables such as
    // Qwen3's enable_thinking.
    nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
    // Normalized messages: {"role", "content": string} (+ "name"); "developer" becomes
    // "system" since chat templates know only the latter. The HF conventions for tools:
    // assistant turns carry "tool_calls": [{"id", "type": "function", "function": {"name",
    // "arguments": object}}] (arguments decoded, as most templates dump them with tojson) and
    // content "" when the client sent null; tool results are {"role": "tool", "tool_call_id",
    // "content"}. Legacy function_call / role "function" turns are mapped onto those.
    nlohmann::ordered_json messages;
    ToolsRequest tools;
};

// Throw ApiError (400) naming the field.
CompletionRequest parse_completion_request(const nlohmann::json& body);
// The chat body is ordered_json so that tool schemas keep the client's key order.
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);

}  // namespace deskside::server
