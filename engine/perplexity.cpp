#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace deskside::engine {

double MeanEstimate::stderr_of_mean() const {
    if (n < 2) return 0;
    const double m = mean();
    const double var = sum_sq / static_cast<double>(n) - m * m;
    return var > 0 ? std::sqrt(var / static_cast<double>(n - 1)) : 0;
}

PerplexityResult perplexity_result(const MeanEstimate& nll, int64_t n_chunks) {
    PerplexityResult r;
    r.n_chunks = n_chunks;
    r.n_scored = nll.n;
    r.nll_mean = nll.mean();
    r.ppl = std::exp(r.nll_mean);
    // The standard error of the mean NLL, carried to PPL by the delta method.
    r.ppl_stderr = r.ppl * nll.stderr_of_mean();
    return r;
}

TextChunks::TextChunks(std::span<const int32_t> tokens_, int64_t n_ctx_, std::optional<int32_t> bos_)
    : tokens(tokens_), n_ctx(n_ctx_), bos(bos_) {
    if (n_ctx < 4) throw std::invalid_argument("perplexity: n_ctx must be at least 4");
    if (n_chunks() == 0)
        throw std::invalid_argument("perplexity: " + std::to_string(tokens.size()) + " tokens do not fill one chunk of " +
                                    std::to_string(n_ctx));
}

std::span<const float> decode_chunk(Model& model, const TextChunks& chunks, int64_t c, int32_t seq) {
    const int64_t n_ctx = chunks.n_ctx;
    const int64_t first = chunks.first_scored();
    const std::span<const int32_t> chunk = chunks.tokens.subspan(c * n_ctx, n_ctx);
    std::vector<BatchToken> batch(n_ctx);
    for (int64_t i = 0; i < n_ctx; ++i)
        batch[i] = {seq, chunk[i], static_cast<int32_t>(i), i >= first && i < n_ctx - 1};
    if (chunks.bos) batch[0].token = *chunks.bos;
    model.truncate(seq, 0);
    return model.decode(batch);
}

double log_sum_exp(std::span<const float> row) {
    const double max_logit = *std::max_element(row.begin(), row.end());
    double z = 0;
    for (const float x : row) z += std::exp(x - max_logit);
    return std::log(z) + max_logit;
}

PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, int64_t n_ctx, std::optional<int32_t> bos,
                            int32_t seq) {
    const TextChunks chunks(tokens, n_ctx, bos);
    const int64_t n_vocab = model.n_vocab();
    MeanEstimate nll;
    for (int64_t c = 0; c < chunks.n_chunks(); ++c) {
        const std::span<const float> logits = decode_chunk(model, chunks, c, seq);
        const std::span<const int32_t> targets = chunks.targets(c);
        for (int64_t i = 0; i < chunks.n_scored(); ++i) {
            const std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
            nll.add(log_sum_exp(row) - row[targets[i]]);
        }
    }
    model.truncate(seq, 0);
    return perplexity_result(nll, chunks.n_chunks());
}

}  // namespace deskside::engine
