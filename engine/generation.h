// The generation loop for one sequence: prompt in one batched step, then one token per step
// until max_tokens, an end-of-generation token (the tokenizer's EOS / EOT / ...) or a stop
// string. Text is streamed through a callback as it becomes final: valid UTF-8, and never a
// part that a stop string might still claim.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model.h"
#include "engine/sampler.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::engine {

struct GenerateParams {
    int32_t max_tokens = 128;
    SamplerParams sampling;
    std::vector<std::string> stop;  // generation ends before the first occurrence of any
    int32_t seq = 0;                // the KV cache sequence to use (cleared first)
};

struct GenerateResult {
    std::vector<int32_t> tokens;  // generated ids (an end-of-generation token is not included)
    std::string text;             // their text, cut before a stop string
    std::string finish_reason;    // "length", "stop" (EOG token or stop string)
    double prompt_seconds = 0;
    double generation_seconds = 0;
};

// Streams completed text through on_text (may be empty). Throws what Model::decode throws.
GenerateResult generate(Model& model, const models::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text = {});

}  // namespace deskside::engine
