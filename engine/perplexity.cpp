#include "engine/perplexity.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace deskside::engine {

PerplexityResult perplexity(Model& model, std::span<const int32_t> tokens, int64_t n_ctx, std::optional<int32_t> bos,
                            int32_t seq) {
    if (n_ctx < 4) throw std::invalid_argument("perplexity: n_ctx must be at least 4");
    PerplexityResult r;
    r.n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
    if (r.n_chunks == 0)
        throw std::invalid_argument("perplexity: " + std::to_string(tokens.size()) + " tokens do not fill one chunk of " +
                                    std::to_string(n_ctx));
    const int64_t first = n_ctx / 2;
    const int64_t n_vocab = model.n_vocab();
    double sum = 0, sum_sq = 0;
    std::vector<BatchToken> batch(n_ctx);
    for (int64_t c = 0; c < r.n_chunks; ++c) {
        const std::span<const int32_t> chunk = tokens.subspan(c * n_ctx, n_ctx);
        for (int64_t i = 0; i < n_ctx; ++i) batch[i] = {seq, chunk[i], static_cast<int32_t>(i), i >= first && i < n_ctx - 1};
        if (bos) batch[0].token = *bos;
        model.truncate(seq, 0);
        const std::span<const float> logits = model.decode(batch);
        for (int64_t i = first; i < n_ctx - 1; ++i) {
            const float* row = logits.data() + (i - first) * n_vocab;
            // -log softmax(row)[next], in double.
            double max_logit = row[0];
            for (int64_t v = 1; v < n_vocab; ++v) max_logit = std::max<double>(max_logit, row[v]);
            double z = 0;
            for (int64_t v = 0; v < n_vocab; ++v) z += std::exp(row[v] - max_logit);
            const double nll = std::log(z) + max_logit - row[chunk[i + 1]];
            sum += nll;
            sum_sq += nll * nll;
            ++r.n_scored;
        }
    }
    model.truncate(seq, 0);
    r.nll_mean = sum / r.n_scored;
    r.ppl = std::exp(r.nll_mean);
    // Standard error of the mean NLL, carried to PPL by the delta method.
    const double var = sum_sq / r.n_scored - r.nll_mean * r.nll_mean;
    r.ppl_stderr = r.ppl * std::sqrt(var / (r.n_scored - 1));
    return r;
}

}  // namespace deskside::engine
