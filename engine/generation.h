// One completion for one prompt, on the generation loop (engine/engine_loop.h): what `deskside
// generate` and tests call. The prompt is computed in batched steps, then one token per step
// until max_tokens, an end-of-generation token or a stop string, exactly as the server does.
// Text is streamed through a callback as it becomes final: valid UTF-8, and never a part that a
// stop string might still claim.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
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
};

struct GenerateResult {
    std::vector<int32_t> tokens;  // generated ids (an end-of-generation token is not included)
    std::string text;             // their text, cut before a stop string
    std::string finish_reason;    // "length", "stop" (EOG token or stop string)
    double prompt_seconds = 0;    // until the first token
    double generation_seconds = 0;
};

// Streams completed text through on_text (may be empty). Throws std::invalid_argument for an
// empty prompt or a sampling parameter out of range, std::runtime_error when the step fails.
GenerateResult generate(Model& model, const models::Tokenizer& tokenizer, std::span<const int32_t> prompt,
                        const GenerateParams& params, const std::function<void(std::string_view)>& on_text = {});

}  // namespace deskside::engine
