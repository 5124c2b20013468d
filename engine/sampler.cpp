#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>

namespace deskside::engine {

int32_t argmax(std::span<const float> logits) {
    // Greedy decoding calls this once per token over the whole vocabulary (262144 logits for
    // Gemma 3: ~0.3 ms scalar, while the other pool threads wait), so it runs on 4-lane vectors
    // (GCC/Clang vector extensions: SSE2 on x86-64, NEON on ARM). Each lane keeps its first
    // maximum; the lowest index among the lanes' maxima is std::max_element's answer, which
    // also skips NaNs, unless the first logit is one (then max_element returns 0).
    using Floats = float __attribute__((vector_size(16)));
    using Ints = int32_t __attribute__((vector_size(16)));
    constexpr size_t kLanes = 4;
    const size_t n = logits.size();
    if (n < 4 * kLanes || std::isnan(logits[0]))
        return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    constexpr float kInf = std::numeric_limits<float>::infinity();
    Floats best = {-kInf, -kInf, -kInf, -kInf};
    Ints at = {-1, -1, -1, -1};
    Ints index = {0, 1, 2, 3};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        Floats v;
        std::memcpy(&v, logits.data() + i, sizeof v);
        const Ints greater = v > best;
        best = greater ? v : best;
        at = greater ? index : at;
        index += static_cast<int32_t>(kLanes);
    }
    float top = logits[0];
    int32_t top_at = 0;
    for (size_t l = 0; l < kLanes; ++l) {
        if (at[l] >= 0 && (best[l] > top || (best[l] == top && at[l] < top_at))) {
            top = best[l];
            top_at = at[l];
        }
    }
    for (; i < n; ++i) {
        if (logits[i] > top) {
            top = logits[i];
            top_at = static_cast<int32_t>(i);
        }
    }
    return top_at;
}

Sampler::Sampler(const SamplerParams& params, int64_t n_vocab) : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
    const auto bad = [](const std::string& what) { throw std::invalid_argument("sampler: " + what); };
    if (!(params.top_p > 0.0f)) bad("top_p must be > 0");
    if (!(params.typical_p > 0.0f)) bad("typical_p must be > 0");
    if (params.min_p > 1.0f) bad("min_p must be <= 1");
    if (!(params.repeat_penalty > 0.0f)) bad("repeat_penalty must be > 0");
    if (params.penalty_last_n < 0) bad("penalty_last_n must be >= 0");
    for (const auto& [id, bias] : params.logit_bias) {
        if (id < 0 || id >= n_vocab) bad("logit_bias token " + std::to_string(id) + " outside the vocabulary");
    }
}

void Sampler::accept(int32_t token, bool generated) {
    recent_.push_back({token, generated});
    // Only the last penalty_last_n matter; trim in bulk to keep accept() O(1) amortized.
    const size_t keep = static_cast<size_t>(params_.penalty_last_n);
    if (recent_.size() > 2 * keep + 64) recent_.erase(recent_.begin(), recent_.end() - keep);
}

double Sampler::uniform() {
    // 53 random bits -> [0, 1), the same on every platform (unlike std::uniform_real_distribution).
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits) {
    const bool penalize = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    // Plain greedy reads the logits where they are: the same pick as the candidate path below
    // (first of the largest), without copying n_vocab candidates per token.
    if (params_.temperature <= 0.0f && params_.logit_bias.empty() && (!penalize || params_.penalty_last_n == 0 || recent_.empty()))
        return argmax(logits.first(static_cast<size_t>(n_vocab_)));
    candidates_.resize(n_vocab_);
    for (int64_t i = 0; i < n_vocab_; ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i]};
    for (const auto& [id, bias] : params_.logit_bias) candidates_[id].logit += bias;

    // Penalties. ref: CTRL (arXiv:1909.05858) for the repetition penalty; OpenAI API docs for
    // presence / frequency.
    if (penalize && params_.penalty_last_n > 0) {
        std::map<int32_t, int> counts;  // occurrences among the generated tokens (0: prompt only)
        const size_t n = std::min(recent_.size(), static_cast<size_t>(params_.penalty_last_n));
        for (size_t i = recent_.size() - n; i < recent_.size(); ++i) counts[recent_[i].id] += recent_[i].generated;
        for (const auto& [id, count] : counts) {
            if (id < 0 || id >= n_vocab_) continue;
            float& l = candidates_[id].logit;
            l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
            if (count > 0) l -= count * params_.frequency_penalty + params_.presence_penalty;
        }
    }

    const auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
    if (params_.temperature <= 0.0f) return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->id;

    // top-k: keep the k best, sorted.
    size_t n = candidates_.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) n = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), by_logit);
    candidates_.resize(n);

    // Probabilities of the survivors (before temperature, as llama.cpp's top-p / min-p see them).
    std::vector<double>& p = probs_;
    p.resize(n);
    const double max_logit = candidates_[0].logit;
    double z = 0;
    for (size_t i = 0; i < n; ++i) z += p[i] = std::exp(candidates_[i].logit - max_logit);
    // Locally typical: keep the tokens whose surprise is closest to the distribution's entropy,
    // in that order, until their mass reaches typical_p. ref: Meister et al., arXiv:2202.00666.
    if (params_.typical_p < 1.0f && n > 1) {
        double entropy = 0;
        for (size_t i = 0; i < n; ++i) entropy -= p[i] / z * std::log(p[i] / z);
        std::vector<size_t> order(n);
        for (size_t i = 0; i < n; ++i) order[i] = i;
        const auto gap = [&](size_t i) { return std::abs(-std::log(p[i] / z) - entropy); };
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return gap(a) < gap(b); });
        double mass = 0;
        size_t keep = 0;
        while (keep < n && mass < params_.typical_p) mass += p[order[keep++]] / z;
        std::vector<size_t> kept(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
        std::sort(kept.begin(), kept.end());  // back in logit order, as the steps below expect
        std::vector<Candidate> c;
        std::vector<double> q;
        z = 0;
        for (const size_t i : kept) {
            c.push_back(candidates_[i]);
            q.push_back(p[i]);
            z += p[i];
        }
        n = kept.size();
        std::copy(c.begin(), c.end(), candidates_.begin());
        std::copy(q.begin(), q.end(), p.begin());
    }
    // top-p: the smallest prefix whose mass reaches top_p. ref: Holtzman et al., arXiv:1904.09751.
    if (params_.top_p < 1.0f) {
        double mass = 0;
        for (size_t i = 0; i < n; ++i) {
            mass += p[i] / z;
            if (mass >= params_.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    // min-p: drop tokens less likely than min_p times the best one.
    if (params_.min_p > 0.0f) {
        size_t keep = 1;
        while (keep < n && p[keep] >= params_.min_p * p[0]) ++keep;
        n = keep;
    }

    // Temperature, then a draw.
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += p[i] = std::exp((candidates_[i].logit - max_logit) / params_.temperature);
    double r = uniform() * total;
    for (size_t i = 0; i < n; ++i) {
        r -= p[i];
        if (r < 0) return candidates_[i].id;
    }
    return candidates_[n - 1].id;
}

}  // namespace deskside::engine
