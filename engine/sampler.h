// Picking the next token from a row of logits.
//
// The chain runs in llama.cpp's order so that the same parameters mean the same thing as there:
// logit bias, repetition / presence / frequency penalties over the recent tokens, then either
// greedy argmax (temperature <= 0) or top-k, typical-p, top-p, min-p, temperature, and a draw
// from the remaining distribution with a seeded generator (same seed, same logits: same token).
// The repetition penalty looks at prompt and generated tokens (as llama.cpp's and vLLM's);
// presence and frequency penalties at generated ones only, as OpenAI defines them.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace deskside::engine {

struct SamplerParams {
    float temperature = 0.8f;  // <= 0: greedy
    int32_t top_k = 40;        // <= 0: whole vocabulary
    float top_p = 0.95f;       // >= 1: off
    float min_p = 0.05f;       // <= 0: off
    float typical_p = 1.0f;    // >= 1: off. Locally typical sampling's mass
    // 1: off. Logits of recent tokens, prompt or generated: positive divided, negative multiplied
    float repeat_penalty = 1.0f;
    float presence_penalty = 0.0f;   // subtracted once from each recent generated token's logit
    float frequency_penalty = 0.0f;  // subtracted per occurrence among the recent generated tokens
    int32_t penalty_last_n = 64;     // how many recent tokens the penalties look at
    std::vector<std::pair<int32_t, float>> logit_bias;  // added to the token's logit (-inf bans it)
    uint64_t seed = 0;
};

class Sampler {
   public:
    // Throws std::invalid_argument naming the parameter when one is out of range.
    Sampler(const SamplerParams& params, int64_t n_vocab);

    // The next token for `logits` (n_vocab values); does not record it (see accept).
    int32_t sample(std::span<const float> logits);
    // Records a token of the sequence for the penalties.
    void accept(int32_t token, bool generated = true);

   private:
    struct Candidate {
        int32_t id;
        float logit;
    };
    double uniform();

    SamplerParams params_;
    int64_t n_vocab_;
    std::mt19937_64 rng_;
    struct Recent {
        int32_t id;
        bool generated;
    };
    std::vector<Recent> recent_;
    // Kept between calls: no allocation per token.
    std::vector<Candidate> candidates_;
    std::vector<double> probs_;
};

// The index of the largest logit (lowest index on ties).
int32_t argmax(std::span<const float> logits);

}  // namespace deskside::engine
