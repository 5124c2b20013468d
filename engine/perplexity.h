// Perplexity of a token stream, computed as llama.cpp's llama-perplexity does so that numbers
// can be compared with it: the text is cut into chunks of n_ctx tokens, each chunk's first token
// is replaced by BOS (when the model has one), the chunk is decoded from an empty cache, and the
// logits at positions n_ctx/2 .. n_ctx-2 score the following token; the first half is context.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/model.h"

namespace deskside::engine {

struct PerplexityResult {
    double ppl = 0;
    double nll_mean = 0;    // mean negative log-likelihood (nats)
    double ppl_stderr = 0;  // standard error of the estimate, as llama-perplexity prints after "±"
    int64_t n_chunks = 0;
    int64_t n_scored = 0;
};

// Throws std::invalid_argument when `tokens` does not fill one chunk.
PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, int64_t n_ctx, std::optional<int32_t> bos,
                            int32_t seq = 0);

}  // namespace deskside::engine
