// Perplexity of a token stream, computed as llama.cpp's llama-perplexity does so that numbers
// can be compared with it: the text is cut into chunks of n_ctx tokens, each chunk's first token
// is replaced by BOS (when the model has one), the chunk is decoded from an empty cache, and the
// logits at positions n_ctx/2 .. n_ctx-2 score the following token; the first half is context.
//
// The chunks are also the unit `deskside score` runs several models in lockstep on
// (engine/score.h): decode_chunk gives one chunk's scored rows, perplexity() loops over them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/model.h"

namespace deskside::engine {

// A running mean with llama-perplexity's uncertainty: the standard error of the mean,
// sqrt((E[x²] - E[x]²) / (n - 1)).
struct MeanEstimate {
    double sum = 0, sum_sq = 0;
    int64_t n = 0;

    void add(double x) {
        sum += x;
        sum_sq += x * x;
        ++n;
    }
    double mean() const { return sum / static_cast<double>(n); }
    double stderr_of_mean() const;
};

struct PerplexityResult {
    double ppl = 0;
    double nll_mean = 0;    // mean negative log-likelihood (nats)
    double ppl_stderr = 0;  // standard error of the estimate, as llama-perplexity prints after "±"
    int64_t n_chunks = 0;
    int64_t n_scored = 0;
};
PerplexityResult perplexity_result(const MeanEstimate& nll, int64_t n_chunks);

// How llama-perplexity cuts `tokens` into chunks of n_ctx. Throws std::invalid_argument when
// n_ctx < 4 or the tokens do not fill one chunk.
struct TextChunks {
    std::span<const int32_t> tokens;
    int64_t n_ctx = 0;
    std::optional<int32_t> bos;  // replaces each chunk's first token

    TextChunks(std::span<const int32_t> tokens, int64_t n_ctx, std::optional<int32_t> bos);
    int64_t n_chunks() const { return static_cast<int64_t>(tokens.size()) / n_ctx; }
    int64_t first_scored() const { return n_ctx / 2; }
    // Rows decode_chunk returns per chunk: positions first_scored() .. n_ctx-2.
    int64_t n_scored() const { return n_ctx - 1 - first_scored(); }
    // The tokens the rows of chunk c predict, one per row.
    std::span<const int32_t> targets(int64_t c) const { return tokens.subspan(c * n_ctx + first_scored() + 1, n_scored()); }
};

// Decodes chunk c on `seq` from an empty cache and returns its scored rows: [n_scored, n_vocab]
// logits, valid until the model's next decode(). Leaves `seq` holding the chunk.
std::span<const float> decode_chunk(Model& model, const TextChunks& chunks, int64_t c, int32_t seq = 0);

// log Σ exp(row), in double.
double log_sum_exp(std::span<const float> row);

// Throws std::invalid_argument when `tokens` does not fill one chunk.
PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, int64_t n_ctx, std::optional<int32_t> bos,
                            int32_t seq = 0);

}  // namespace deskside::engine
