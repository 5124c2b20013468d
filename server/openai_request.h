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
};

struct ChatRequest {
    GenerationRequest gen;
    // Normalized messages: {"role", "content": string} (+ "name"); "developer" becomes
    // "system" since chat templates know only the latter.
    nlohmann::ordered_json messages;
};

// Throw ApiError (400) naming the field.
CompletionRequest parse_completion_request(const nlohmann::json& body);
ChatRequest parse_chat_request(const nlohmann::json& body);

}  // namespace deskside::server
